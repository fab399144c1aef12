"""Reading machine files without hanging: regular files only, bounded sizes, and a deadline.

sysfs, /proc and configuration files are opened non-blocking and used only when fstat says
they are regular files, so a FIFO, socket or device put where a file belongs is refused, not
waited on. A regular file can still block (a wedged driver's sysfs attribute): the probe that
reads it runs in a daemon thread under a deadline, and the path it was reading when time ran
out names the culprit. A daemon thread stuck in read() does not keep the process from exiting.
Stdlib only: this runs inside `import jax`.
"""

from __future__ import annotations

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
        finally:
            os.close(descriptor)
    finally:
        _reading.pop(me, None)


def read_text(path: str | os.PathLike[str], limit: int) -> str:
    """read_file decoded as UTF-8 (bad bytes replaced); ValueError when larger than `limit`."""
    data = read_file(path, limit)
    if len(data) > limit:
        raise ValueError(f"{os.fspath(path)} is larger than {limit} bytes")
    return data.decode("utf-8", errors="replace")


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
