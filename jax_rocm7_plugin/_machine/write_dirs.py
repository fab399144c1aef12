"""The folders the stack writes in, as each reader chooses them, and whether this process can write there: what
each is named by (a variable, or the default its reader takes when the variable is unset), whether it exists (or
which existing folder above it would be created in), its owner and mode, whether its file system is mounted
read-only, and the room left there.

Who writes where (each at the commit _policy/stack_variables_generated.json cites for its reader):
- XLA compiles GPU kernels in the first existing of TEST_TMPDIR, TMPDIR, TMP, /tmp (_machine/temp_dir.py);
- jax keeps compiled programs in JAX_COMPILATION_CACHE_DIR where it is set (jax/_src/config.py: no default);
- MIOpen keeps its kernel cache in MIOPEN_CUSTOM_CACHE_DIR, else $HOME/.cache/miopen, and its tuning database in
  MIOPEN_USER_DB_PATH, else $HOME/.config/miopen (MIOpen's docs: "kernel cache", "user database"); where such a
  default is on a network file system (mountinfo's type), MIOpen takes the temporary folder instead
  (_policy/machine_needs.json "miopen_network_fallback", from its sources);
- comgr keeps its cache in AMD_COMGR_CACHE_DIR, else $XDG_CACHE_HOME/comgr, else $HOME/.cache/comgr (comgr's
  README: "AMD_COMGR_CACHE_DIR");
- RCCL and the runtime share memory through /dev/shm (_machine/shm.py reads its size).

Under the sysroot; a stat and a statvfs per folder, under the caller's deadline.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from jax_rocm7_plugin._environment import read
from jax_rocm7_plugin._machine import host_path
from jax_rocm7_plugin._machine.mounts import Mount, mount_of, read_mounts
from jax_rocm7_plugin._policy.machine_needs import miopen_network_fallback
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._safe_io import stat_named


class WriteDir(NamedTuple):
    purpose: str  # what is written there ("MIOpen's kernel cache")
    named_by: str  # the variable, or "default (<variable> unset)"
    variable: str | None  # the variable that sets it (None: nothing does)
    path: str  # as the machine names it
    exists: bool
    is_dir: bool
    base: str | None  # the nearest existing folder at or above it (where it would be created)
    uid: int | None  # of `base`
    gid: int | None
    mode: int | None
    read_only: bool | None  # `base`'s file system is mounted read-only
    free_bytes: int | None  # room left for an unprivileged writer in `base`'s file system
    moved_from: str | None = None  # the default its reader left, for the file system named (MIOpen's: "lustre")


class WriteDirs(NamedTuple):
    home: str | None  # HOME as the process has it (None: unset)
    dirs: tuple[WriteDir, ...]


def _temp_directory(environ: Mapping[str, str], variables: tuple[str, ...]) -> str:
    """std::filesystem::temp_directory_path as libstdc++ answers it: the first of `variables` set, else /tmp."""
    return next((value for name in variables if (value := read(name, environ))), "/tmp")


def _miopen_moved(
    root: Path, mounts: tuple[Mount, ...], path: str | None, environ: Mapping[str, str]
) -> tuple[str, str] | None:
    """(the temporary folder, the network file system's type) where MIOpen leaves its default `path`: the nearest
    existing folder at or above it is on a file system of MIOpen's network list."""
    if path is None or not path.startswith("/"):
        return None
    fallback = miopen_network_fallback()
    _, _, base, _ = _nearest(root, path)
    mount = mount_of(mounts, base) if base is not None else None
    if mount is None or mount.fstype not in fallback.network_types:
        return None
    return _temp_directory(environ, fallback.temp_variables), mount.fstype


def _wanted(
    root: Path, environ: Mapping[str, str], mounts: tuple[Mount, ...]
) -> list[tuple[str, str, str | None, str | None, str | None]]:
    """(purpose, named by, variable, path, the file system it left) of each folder written, as its reader picks it."""
    home = read("HOME", environ) or None
    cache_home = read("XDG_CACHE_HOME", environ) or (f"{home}/.cache" if home else None)
    found: list[tuple[str, str, str | None, str | None, str | None]] = []
    jax_cache = read("JAX_COMPILATION_CACHE_DIR", environ)
    if jax_cache:
        found.append(
            ("jax's compilation cache", "JAX_COMPILATION_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR", jax_cache, None)
        )
    for purpose, variable, default in (
        ("MIOpen's kernel cache", "MIOPEN_CUSTOM_CACHE_DIR", f"{home}/.cache/miopen" if home else None),
        ("MIOpen's tuning database", "MIOPEN_USER_DB_PATH", f"{home}/.config/miopen" if home else None),
        ("comgr's cache", "AMD_COMGR_CACHE_DIR", f"{cache_home}/comgr" if cache_home else None),
    ):
        value = read(variable, environ)
        if value:
            found.append((purpose, variable, variable, value, None))
            continue
        moved = _miopen_moved(root, mounts, default, environ) if variable in miopen_network_fallback().folders else None
        if moved is not None:
            temp, fstype = moved
            said = f"default ({variable} unset): {default} is on {fstype}, so MIOpen takes the temporary folder"
            found.append((purpose, said, variable, temp, fstype))
        else:
            found.append((purpose, f"default ({variable} unset)", variable, default, None))
    return found


def _nearest(root: Path, path: str) -> tuple[bool, bool, str | None, os.stat_result | None]:
    """(exists, is a folder, the nearest existing folder at or above it, that folder's stat)."""
    current = path.rstrip("/") or "/"
    exists = is_dir = False
    first = True
    for _ in range(64):  # a bound on the walk up: no path is deeper
        try:
            info = stat_named(host_path(root, current))
        except (OSError, ValueError):
            info = None
        if info is not None:
            if first:
                exists, is_dir = True, stat.S_ISDIR(info.st_mode)
            if stat.S_ISDIR(info.st_mode):
                return exists, is_dir, current, info
            return exists, is_dir, None, None  # a file where a folder is wanted (or above it)
        first = False
        if current == "/":
            break
        current = os.path.dirname(current) or "/"
    return exists, is_dir, None, None


def read_write_dirs(root: Path, environ: Mapping[str, str]) -> WriteDirs:
    home = read("HOME", environ) or None
    dirs = []
    for purpose, named_by, variable, path, moved_from in _wanted(root, environ, read_mounts(root)):
        if path is None or not path.startswith("/"):
            dirs.append(WriteDir(purpose, named_by, variable, path or "", False, False, None, None, None, None, None,
                                 None, moved_from))  # fmt: skip
            continue
        exists, is_dir, base, info = _nearest(root, path)
        read_only = free = None
        if base is not None:
            try:
                fs = os.statvfs(host_path(root, base))
                read_only, free = bool(fs.f_flag & os.ST_RDONLY), fs.f_bavail * fs.f_frsize
            except (OSError, ValueError):
                pass
        dirs.append(
            WriteDir(
                purpose, named_by, variable, path, exists, is_dir, base,
                info.st_uid if info else None, info.st_gid if info else None,
                stat.S_IMODE(info.st_mode) if info else None, read_only, free, moved_from,
            )
        )  # fmt: skip
    return WriteDirs(home, tuple(dirs))
