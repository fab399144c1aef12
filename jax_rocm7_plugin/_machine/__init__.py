"""This machine, read under a sysroot: KFD topology, /dev nodes, /dev/shm, ROCm installs, pip ROCm, ld.so, packages.
May import _binary, _policy, _settings (typed fields) and the foundation; never _pipeline or above."""

import os
from pathlib import Path


def host_path(root: Path, absolute: str | os.PathLike[str]) -> Path:
    """`absolute` (a path as seen on the host, e.g. /dev/kfd) under `root` (Settings.sysroot: "/" on a real
    machine, a synthetic tree in tests). Every machine fact is read through it."""
    return root / os.fspath(absolute).lstrip("/")


def text_under(root: Path, absolute: str, limit: int) -> str | None:
    """A small file of the machine (`absolute` under `root`) as text, at most `limit` bytes; None where it is missing,
    unreadable, no regular file or larger (_safe_io.read_text: a FIFO never blocks): unknown, never an error."""
    from jax_rocm7_plugin._safe_io import read_text

    try:
        return read_text(host_path(root, absolute), limit)
    except (OSError, ValueError):
        return None


def root_owned(root: Path, absolute: str) -> bool:
    """Whether root owns `absolute` (False where it cannot be read): only then may a fix advise sudo for it."""
    try:
        return os.stat(host_path(root, absolute)).st_uid == 0
    except (OSError, ValueError):
        return False


def resolved(path: Path) -> Path:
    """`path` with its links followed (_safe_io.real_path): a link that loops, or a name with a NUL byte, stays as it
    is instead of raising, so that a damaged tree is read as damaged."""
    from jax_rocm7_plugin._safe_io import real_path

    return Path(real_path(path))


def unrooted(path: Path, root: Path) -> str:
    """`path` (a file under `root`) as the machine it lies on names it: host_path's inverse. A path outside `root`
    is left as it is."""
    if str(root) != "/" and path.is_relative_to(root):
        return "/" + os.path.relpath(path, root)
    return str(path)


def machine_path(path: Path, root: Path) -> str:
    """unrooted, and through /opt/rocm where that link leads to `path` (what users put on LD_LIBRARY_PATH and in
    HIP_DEVICE_LIB_PATH)."""
    text = unrooted(path, root)
    rocm = root / "opt" / "rocm"
    if rocm.is_symlink() and resolved(path).is_relative_to(resolved(rocm)):
        text = "/opt/rocm/" + os.path.relpath(resolved(path), resolved(rocm))
    return text
