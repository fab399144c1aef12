"""The parent's end of the courier: start it, send it messages, read its events under a deadline.

The courier's stderr (jaxlib's own log, and on process 0 the coordination service's) is drained
in a thread and kept bounded: its last lines say why a join failed, and how many processes the
coordinator saw.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._names import PLUGIN_PACKAGE

MAX_STDERR_BYTES = 256 * 1024
MAX_EVENT_BYTES = 64 * 1024 * 1024  # process 0's `records` of 512 processes of 8 KB is 4 MB


class CourierGone(Exception):
    """The courier exited, was killed, or the deadline passed before the awaited event."""

    def __init__(self, why: str, returncode: int | None) -> None:
        super().__init__(why)
        self.why = why
        self.returncode = returncode


def courier_start(environ: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The courier's command and environment. `-P`: the caller's folder is not put on the courier's sys.path (a
    `numpy.py` or a `jax/` in a shared project folder would be imported in its place); where this package itself
    was imported from a folder the interpreter does not search by itself (a checkout), that folder goes on its
    PYTHONPATH, so that the courier runs this very package."""
    import site

    environ = {**environ, _environment.COURIER_PARENT: str(os.getpid())}
    home = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if home not in (*site.getsitepackages(), site.getusersitepackages()):
        environ["PYTHONPATH"] = os.pathsep.join(filter(None, [home, _environment.read("PYTHONPATH", environ)]))
    return [sys.executable, "-P", "-m", f"{PLUGIN_PACKAGE}._cluster.courier"], environ


class CourierLink:
    def __init__(self, environ: dict[str, str]) -> None:
        command, environ = courier_start(environ)
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environ,
            cwd=os.getcwd(),  # the user's relative paths mean what they meant; -P keeps its modules out
        )
        self._stderr: collections.deque[bytes] = collections.deque()
        self._stderr_size = 0
        self._buffer = b""
        self._drain = threading.Thread(target=self._drain_stderr, name="rocm-courier-stderr", daemon=True)
        self._drain.start()

    def _drain_stderr(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        while chunk := stream.read1(65536):  # type: ignore[attr-defined]
            self._stderr.append(chunk)
            self._stderr_size += len(chunk)
            while self._stderr_size > MAX_STDERR_BYTES and len(self._stderr) > 1:
                self._stderr_size -= len(self._stderr.popleft())

    def stderr_text(self) -> str:
        self._drain.join(0.5)
        return b"".join(self._stderr).decode("utf-8", errors="replace")

    def send(self, message: dict[str, Any]) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        try:
            stdin.write((json.dumps(message) + "\n").encode())
            stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the courier is gone; the next read says how

    def wait_for(self, wanted: tuple[str, ...], deadline: float) -> dict[str, Any]:
        """The next event named in `wanted` (or `error`), skipping others; CourierGone otherwise."""
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line, self._buffer = self._buffer[:newline], self._buffer[newline + 1 :]
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # not ours (a library printing to stdout)
                if not isinstance(event, dict):
                    continue
                if event.get("event") in (*wanted, "error"):
                    return event
                continue
            left = deadline - time.time()
            if left <= 0:
                self.kill()
                raise CourierGone("deadline", None)
            ready, _, _ = select.select([stdout], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(stdout.fileno(), 1 << 20)
            if not chunk:
                raise CourierGone("exited", self._returncode())
            self._buffer += chunk
            if len(self._buffer) > MAX_EVENT_BYTES:
                self.kill()
                raise CourierGone("oversized", None)

    def _returncode(self) -> int | None:
        try:
            return self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)

    def close(self, deadline: float) -> None:
        """Let the courier finish (it exits by itself after `done`), else end it."""
        try:
            self.process.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            self.kill()


def death_description(returncode: int | None) -> str:
    if returncode is None:
        return "was ended at the deadline"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"died with {name}"
    return f"exited with status {returncode}"
