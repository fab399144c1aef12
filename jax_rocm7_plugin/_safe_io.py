"""Reading machine files without hanging: regular files only, bounded sizes, and a deadline.

sysfs, /proc and configuration files are opened non-blocking and used only when fstat says
they are regular files, so a FIFO, socket or device put where a file belongs is refused, not
waited on. A regular file can still block (a wedged driver's sysfs attribute): the probe that
reads it runs in a daemon thread under a deadline, and the path it was reading when time ran
out names the culprit. A daemon thread stuck in read() does not keep the process from exiting.
Stdlib only: this runs inside `import jax`.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
DEADLINE_SECONDS = 2.0


class NotARegularFile(OSError):
    """The path exists but is a FIFO, socket, device or directory."""


class Deadline(Exception):
    """A probe did not finish in time; `path` is what it was reading then (None if not reading)."""

    def __init__(self, path: str | None, seconds: float) -> None:
        super().__init__(f"{path or 'the machine probe'} did not answer within {seconds:g} s")
        self.path = path
        self.seconds = seconds


# Thread id -> the file that thread is reading now: what a deadline names when it runs out.
_reading: dict[int, str] = {}


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


def read_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """Up to `limit` + 1 bytes of a regular file (so callers can tell "too large").

    Raises NotARegularFile for FIFOs, sockets, devices and directories (never blocking on them),
    and OSError as open/read do.
    """
    me = threading.get_ident()
    _reading[me] = os.fspath(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            mode = os.fstat(descriptor).st_mode
            if not stat.S_ISREG(mode):
                raise NotARegularFile(f"{os.fspath(path)} is {_kind(mode)}, not a regular file")
            return _read_up_to(descriptor, limit)
        finally:
            os.close(descriptor)
    finally:
        _reading.pop(me, None)


def stat_named(path: str | os.PathLike[str]) -> os.stat_result:
    """os.stat, naming `path` as what this thread reads (a deadline running out says it)."""
    me = threading.get_ident()
    _reading[me] = os.fspath(path)
    try:
        return os.stat(path)
    finally:
        _reading.pop(me, None)


def _read_up_to(descriptor: int, limit: int) -> bytes:
    """Up to `limit` + 1 bytes of an open regular file, read blocking."""
    os.set_blocking(descriptor, True)
    chunks = []
    remaining = limit + 1
    while remaining > 0:
        chunk = os.read(descriptor, min(remaining, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_text(path: str | os.PathLike[str], limit: int) -> str:
    """read_file decoded as UTF-8 (bad bytes replaced); ValueError when larger than `limit`."""
    data = read_file(path, limit)
    if len(data) > limit:
        raise ValueError(f"{os.fspath(path)} is larger than {limit} bytes")
    return data.decode("utf-8", errors="replace")


def read_attribute(path: str, limit: int = 4096) -> str:
    """A small sysfs attribute (one page at most), for reads of many of them where read_text's checks would be
    most of the cost (the job check's GPU counters at backend start). Opened non-blocking and read once: a FIFO
    put there answers at once (empty, or EAGAIN as an OSError) instead of blocking, a directory raises, and a
    device gives at most `limit` bytes. Callers still run under with_deadline, as every machine read does."""
    me = threading.get_ident()
    _reading[me] = path
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            return os.read(descriptor, limit).decode("utf-8", errors="replace")
        finally:
            os.close(descriptor)
    finally:
        _reading.pop(me, None)


def under(root: str | os.PathLike[str], path: str) -> str:
    """`path` as the host names it (/dev/kfd) under `root` (the sysroot: "/" on a real machine, a synthetic tree in
    tests). The foundation's own, for what reads the machine without the machine package (a warm start)."""
    return os.path.join(root, path.lstrip("/"))


def real_path(path: str | os.PathLike[str]) -> str:
    """`path` with its links followed as far as they lead. A link that loops (`/opt/rocm` -> itself) is left where
    the loop starts, and a name no file can have (a NUL byte read from a damaged file) is returned as it is: both are
    what the kernel refuses to open, facts about the machine, never an exception that ends a diagnosis."""
    try:
        return os.path.realpath(path)  # not strict: a loop or a missing part ends the walk there
    except ValueError:  # embedded NUL
        return os.fspath(path)


HOSTNAME = "/proc/sys/kernel/hostname"
MAX_HOSTNAME_BYTES = 256  # HOST_NAME_MAX is 64; anything far larger is not a host name


def host_name(root: str | os.PathLike[str]) -> str:
    """This host's name as its kernel states it (HOSTNAME, the UTS name) under `root`, so that tests give each
    process a host of its own; gethostname where the file says nothing. Here, beside the reader, because every
    process of a job states its host at each start: the machine package is not imported for it."""
    try:
        name = read_text(under(root, HOSTNAME), MAX_HOSTNAME_BYTES).strip()
    except (OSError, ValueError):
        name = ""
    if name:
        return name
    import socket

    return socket.gethostname()


def with_deadline(probe: Callable[[], T], seconds: float | None = None) -> T:
    """probe() in a daemon thread; Deadline (naming what it was reading) if it does not finish in time.

    Exceptions the probe raises are raised here. `seconds`: DEADLINE_SECONDS unless given.
    """
    seconds = DEADLINE_SECONDS if seconds is None else seconds
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = probe()
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread as is
            outcome["error"] = error

    worker = threading.Thread(target=run, name="rocm-machine-probe", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise Deadline(_reading.get(worker.ident or 0), seconds)
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


# --- Caches this plugin reads back and acts on --------------------------------------------------------------
#
# A start-up plan names libraries the loader preloads and variables it sets; a load verdict decides whether a
# library is loaded without the child-process test. Whoever can write them runs code as this user. So a cache
# file is trusted only where it and every folder on its way are this user's (the checks of OpenSSH's StrictModes
# and git's safe.directory): the file owned by this user and writable by no one else; every folder from the
# cache root down owned by this user (or root) and writable by no one else; every folder above the cache root
# owned by root or this user, and writable by no one else unless it is root's and sticky (/tmp) or this user's
# own with this user's own group (a home of a user private group, umask 002).


class Untrusted(OSError):
    """A cache file or folder that another user could have written: not read, not written."""


_said_untrusted: set[str] = set()


def _writable_by_others(info: os.stat_result) -> bool:
    return bool(info.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def untrusted_reason(
    root: str | os.PathLike[str], folder: str | os.PathLike[str], *, uid: int | None = None, gid: int | None = None
) -> str | None:
    """Why `folder` (the cache root or a folder below it) may hold what another user wrote; None: it may not.
    `uid`, `gid`: the user it is judged for (default: this process's)."""
    uid = os.geteuid() if uid is None else uid
    gid = os.getegid() if gid is None else gid
    root, folder = os.path.normpath(root), os.path.normpath(folder)
    if folder != root and not folder.startswith(root.rstrip("/") + "/"):
        return f"{folder} is not below the cache root {root}"
    # Above the cache root, links are followed (a /home that links elsewhere); below it, a link is a component
    # like any other, and shows as writable by all (lstat of a link), so it is refused.
    real_root = os.path.realpath(root)
    real = real_root + folder[len(root) :]
    parts = real.split("/")
    for depth in range(1, len(parts) + 1):
        path = "/".join(parts[:depth]) or "/"
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return None  # nothing there yet: nothing to read, and what is made below it is made private
        except OSError as error:
            return f"{path}: {error.strerror}"
        below = len(path) >= len(real_root)
        if info.st_uid not in (0, uid):
            return f"{path} is owned by uid {info.st_uid}, not by this user ({uid}) or root"
        if not _writable_by_others(info):
            continue
        if below:
            return f"{path} is writable by its group or by others (mode {info.st_mode & 0o7777:o})"
        sticky_root = info.st_uid == 0 and info.st_mode & stat.S_ISVTX
        own_group = info.st_uid == uid and info.st_gid == gid and not info.st_mode & stat.S_IWOTH
        if not (sticky_root or own_group):
            return f"{path}, above the cache root, is writable by others (mode {info.st_mode & 0o7777:o})"
    return None


def say_untrusted(reason: str) -> None:
    """Once per process and reason, at debug level: the cold path is taken and nothing is written there."""
    if reason in _said_untrusted:
        return
    _said_untrusted.add(reason)
    import logging

    # The package's logger (its name from this module's: a foundation module imports no sibling, _names included).
    logging.getLogger(__name__.rpartition(".")[0]).debug("ROCm backend: cache not used (%s)", reason)


def read_trusted(path: str | os.PathLike[str], limit: int, root: str | os.PathLike[str]) -> str:
    """read_text of a cache file, where it and its folders are trusted (see above); Untrusted otherwise. The file
    is opened without following a symbolic link and judged by what was opened."""
    reason = untrusted_reason(root, os.path.dirname(os.fspath(path)))
    if reason is None:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            info = os.fstat(descriptor)
            if not stat.S_ISREG(info.st_mode):
                raise NotARegularFile(f"{os.fspath(path)} is {_kind(info.st_mode)}, not a regular file")
            reason = _not_ours(os.fspath(path), info)
            if reason is None:
                data = _read_up_to(descriptor, limit)
                if len(data) > limit:
                    raise ValueError(f"{os.fspath(path)} is larger than {limit} bytes")
                return data.decode("utf-8", errors="replace")
        finally:
            os.close(descriptor)
    say_untrusted(reason)
    raise Untrusted(reason)


def _make_private_folders(folder: str) -> None:
    """Every missing folder of `folder` made 0700 (os.makedirs gives the ones above the last the default mode)."""
    missing = []
    path = folder
    while path and not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            os.mkdir(path, 0o700)


def _untrusted_file(path: str) -> str | None:
    """Why an existing file at `path` is not this user's alone (None: it is, or there is none)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return f"{path} is {_kind(info.st_mode)}, not a regular file"
    return _not_ours(path, info)


def _not_ours(path: str, info: os.stat_result) -> str | None:
    """Why a cache file is not this user's alone (None: it is)."""
    if info.st_uid != os.geteuid():
        return f"{path} is owned by uid {info.st_uid}, not by this user ({os.geteuid()})"
    if _writable_by_others(info):
        return f"{path} is writable by its group or by others (mode {info.st_mode & 0o777:o})"
    return None


def write_private(
    folder: str | os.PathLike[str], name: str, text: str, root: str | os.PathLike[str], *, unless_same: bool = False
) -> bool:
    """Write `text` as folder/name, private (0600 in folders made 0700) and atomically (a temporary file renamed
    over it); nothing where the folders are not trusted (see above) or not writable. True when written.
    `unless_same`: nothing where the file holds `text` already, and where several processes write the same text
    at once, one of them writes it (the file is linked into place, never over one that appeared meanwhile with
    the same text)."""
    folder = os.fspath(folder)
    try:
        _make_private_folders(folder)
    except OSError:
        return False
    target = os.path.join(folder, name)
    reason = untrusted_reason(root, folder) or _untrusted_file(target)
    if reason is not None:  # never written over: what is there stays for whoever looks into it
        say_untrusted(reason)
        return False
    if unless_same and _holds(target, text):
        return False
    partial = os.path.join(folder, f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        if unless_same:
            try:
                os.link(partial, target)  # where none is there: this process writes it, and no other
            except FileExistsError:
                if _holds(target, text):  # another process wrote the same meanwhile
                    os.unlink(partial)
                    return False
                os.replace(partial, target)  # a stale one: replaced whole
            else:
                os.unlink(partial)
            return True
        os.replace(partial, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        return False
    return True


def _holds(path: str, text: str) -> bool:
    """`path` is a file holding exactly `text` (read no further than that)."""
    expected = text.encode("utf-8")
    try:
        with open(path, "rb") as handle:
            return handle.read(len(expected) + 1) == expected
    except OSError:
        return False


def claim_beside(destination: str | os.PathLike[str]) -> str:
    """A new empty file beside `destination` (0600, named after it) to write what is then renamed into place
    (`publish`); OSError where its folder takes none."""
    import tempfile  # not on the start-up path

    folder, name = os.path.split(os.fspath(destination))
    descriptor, partial = tempfile.mkstemp(dir=folder or ".", prefix=f".{name}.", suffix=".partial")
    os.close(descriptor)
    return partial


def publish(partial: str | os.PathLike[str], destination: str | os.PathLike[str], *, force: bool) -> bool:
    """Rename a claimed file into place: over an existing file only with `force`; without it never over one, even
    one that appeared meanwhile (False: one is there, and `partial` is left to its caller)."""
    if force:
        os.replace(partial, destination)
        return True
    try:
        os.link(partial, destination)
    except FileExistsError:
        return False
    os.unlink(partial)
    return True
