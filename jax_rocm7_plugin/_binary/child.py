"""The one way we run code that may die: a stdlib-only script in a `python -I -S` child process.

A child speaks JSON, one object a line, each printed as soon as it is known (`load_child.py`,
`hip_child.py`), so a death in a later step still leaves the earlier answers. The parent gets them
all, and how the child ended: its exit status, the signal that killed it, or the time limit it ran
past (the child and anything it started are then killed: it runs in its own session). Every child
starts under `child_guard.py`, so it cannot outlive this process (killed while waiting) nor its own
limit (this process stopped or starved), whatever the library it loads does. A child
still running after `notice_after` seconds gets one line on stderr saying what is being waited
for, so nobody faces a silent wait.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from jax_rocm7_plugin._record import NamedTuple

HERE = Path(__file__).resolve().parent


class ChildRun(NamedTuple):
    records: tuple[dict[str, Any], ...]  # the JSON objects it printed, in order
    returncode: int | None  # None: it did not start, or was stopped at the time limit
    timed_out: float | None = None  # the limit it ran past, in seconds
    stderr_tail: str = ""  # its last line on stderr
    start_error: str | None = None  # why it could not be started

    def stage(self, name: str) -> dict[str, Any] | None:
        """The last record of this stage, if it got there."""
        for record in reversed(self.records):
            if record.get("stage") == name:
                return record
        return None

    @property
    def death(self) -> str | None:
        """How it ended when not by finishing: "SIGSEGV", "no answer within 30 s", "exit status 1: ..."."""
        if self.start_error is not None:
            return f"could not start: {self.start_error}"
        if self.timed_out is not None:
            return f"no answer within {self.timed_out:g} s"
        if self.returncode is not None and self.returncode < 0:
            return _signal_name(self.returncode)
        if self.returncode:
            return f"exit status {self.returncode}" + (f": {self.stderr_tail}" if self.stderr_tail else "")
        return None

    @property
    def killed_by_signal(self) -> bool:
        return self.returncode is not None and self.returncode < 0


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _say_once(notice: str) -> None:
    try:
        sys.stderr.write(notice + "\n")
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):  # no usable stderr (pythonw, closed): nothing to say it on
        pass


def run_script(
    script: str,
    arguments: Sequence[str],
    *,
    timeout: float,
    notice_after: float | None = None,
    notice: str = "",
    with_site: dict[str, str] | None = None,
) -> ChildRun:
    """Run `script` (a file beside this one) in `python -I -S` with `arguments`, under `timeout` seconds.

    `with_site`: run it with site-packages and this environment instead (a child that imports jax).
    """
    flags = [] if with_site is not None else ["-I", "-S"]
    guard = [str(HERE / "child_guard.py"), str(os.getpid()), f"{timeout:g}"]
    command = [sys.executable, *flags, *guard, str(HERE / script), *arguments]
    try:
        process = subprocess.Popen(
            command,
            env=with_site,
            cwd="/" if with_site is not None else None,  # not the user's folder: its modules would shadow ours
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,  # so a time-out kills whatever it started too
        )
    except OSError as error:
        return ChildRun((), None, start_error=str(error))
    timed_out = None
    started = time.monotonic()
    try:
        first_wait = timeout if notice_after is None or not notice else min(notice_after, timeout)
        try:
            stdout, stderr = process.communicate(timeout=first_wait)
        except subprocess.TimeoutExpired:
            if first_wait >= timeout:
                raise
            _say_once(notice)
            stdout, stderr = process.communicate(timeout=timeout - first_wait)
    except subprocess.TimeoutExpired:
        timed_out = timeout
        _kill(process)
        stdout, stderr = process.communicate()
    except BaseException:  # Ctrl-C while waiting: the child must not outlive us
        _kill(process)
        process.wait()
        raise
    if timed_out is None and process.returncode == -signal.SIGALRM and time.monotonic() - started >= timeout:
        timed_out = timeout  # the guard's alarm came before this process's own limit (it was slowed or stopped)
    return ChildRun(
        tuple(_records(stdout)),
        None if timed_out is not None else process.returncode,
        timed_out,
        (stderr.strip().splitlines() or [""])[-1][-500:],
    )


def _kill(process: subprocess.Popen[Any]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()


def _records(stdout: str) -> list[dict[str, Any]]:
    found = []
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            found.append(record)
    return found


class CommandRun(NamedTuple):
    """How a command of the user's ended (the report bundles it)."""

    returncode: int | None  # None: it did not start, or was stopped at the time limit
    wall_seconds: float
    timed_out: float | None = None  # the limit it ran past: it and its process group were killed
    stdout_tail: bytes = b""
    stderr_tail: bytes = b""
    start_error: str | None = None

    @property
    def outcome(self) -> str:
        """How it ended: "exit status 0", "SIGSEGV", "ran past the 60 s limit: ...", "could not start: ..."."""
        if self.start_error is not None:
            return f"could not start: {self.start_error}"
        if self.timed_out is not None:
            return f"ran past the {self.timed_out:g} s limit: killed with its process group"
        assert self.returncode is not None
        return _signal_name(self.returncode) if self.returncode < 0 else f"exit status {self.returncode}"

    @property
    def exit_status(self) -> int:
        """The status a shell would give for how it ended: its own; 128 + N for signal N; 124 stopped at the
        limit (as timeout(1)); 127 not found, 126 found but not runnable."""
        if self.start_error is not None:
            return 127 if "No such file" in self.start_error else 126
        if self.timed_out is not None:
            return 124
        assert self.returncode is not None
        return 128 - self.returncode if self.returncode < 0 else self.returncode

    @property
    def said(self) -> str:
        """How it ended, for the terminal: "exited with status 3", "could not start: ...", "was stopped at the 1 s
        limit", "was killed by SIGSEGV"."""
        if self.start_error is not None:
            return f"could not start: {self.start_error}"
        if self.timed_out is not None:
            return f"was stopped at the {self.timed_out:g} s limit (it and its process group were killed)"
        assert self.returncode is not None
        return (
            f"was killed by {_signal_name(self.returncode)}"
            if self.returncode < 0
            else (f"exited with status {self.returncode}")
        )


def run_command(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    timeout: float,
    output_dir: Path,
    tail_bytes: int,
    echo: tuple[BinaryIO, BinaryIO] | None = None,
) -> CommandRun:
    """Run `argv` in its own session under `timeout` seconds; its output goes to files in `output_dir` (nothing
    held in memory), of which the last `tail_bytes` of each are returned. `echo`: also pass its stdout and stderr
    through to these streams as they come (a thread per stream drains its pipe, so the command never blocks on
    a full one)."""
    import threading
    import time

    stdout_path, stderr_path = output_dir / "stdout", output_dir / "stderr"
    start = time.monotonic()
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        target = (subprocess.PIPE, subprocess.PIPE) if echo is not None else (stdout, stderr)
        try:
            process = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=target[0],
                stderr=target[1],
                env=env,
                start_new_session=True,
            )
        except OSError as error:
            return CommandRun(None, 0.0, start_error=str(error))
        copiers = []
        if echo is not None:
            assert process.stdout is not None and process.stderr is not None
            for pipe, file, terminal in ((process.stdout, stdout, echo[0]), (process.stderr, stderr, echo[1])):
                copier = threading.Thread(target=_copy, args=(pipe, file, terminal), daemon=True)
                copier.start()
                copiers.append(copier)
        timed_out = None
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = timeout
            _kill(process)
            process.wait()
        except BaseException:  # Ctrl-C: the command must not outlive the report
            _kill(process)
            process.wait()
            raise
        for copier in copiers:  # the pipes close when the group is gone; a grandchild holding one is not waited for
            copier.join(timeout=5)
    wall = time.monotonic() - start
    return CommandRun(
        None if timed_out is not None else process.returncode,
        wall,
        timed_out,
        _tail(stdout_path, tail_bytes),
        _tail(stderr_path, tail_bytes),
    )


def _copy(pipe: BinaryIO, file: BinaryIO, terminal: BinaryIO) -> None:
    """Everything from `pipe` into `file`, and to `terminal` while it takes it (a closed terminal stops only the
    echo: the file still gets all of it)."""
    echoing = True
    for chunk in iter(lambda: pipe.read1(65536), b""):  # type: ignore[attr-defined]
        file.write(chunk)
        if echoing:
            try:
                terminal.write(chunk)
                terminal.flush()
            except (OSError, ValueError):
                echoing = False
    file.flush()


def _tail(path: Path, size: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - size))
        return handle.read()
