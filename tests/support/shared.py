"""Builds shared by every xdist worker of a test session (test support, never shipped).

A wheel pair or a venv takes 10-30 s to make. Each is made once per session, under a lock, in a folder every
worker of the session sees (beside the workers' own temporary folders); a worker that needs it while another
makes it waits for that one. What is made there is only read afterwards: a test that changes a venv (reinstalls
a wheel) makes a private one (tests/conftest.py `private_venv`).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

MADE = ".made"  # written last: a folder without it was cut short, and is made again


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's folder for shared builds: beside every worker's own under xdist, else inside the one."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-builds"
    root.mkdir(exist_ok=True)
    return root


def once(root: Path, key: str, make: Callable[[Path], object]) -> Path:
    """`root/key`, made by `make(folder)` the first time any worker asks (the others wait on the lock)."""
    folder = root / key
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / MADE).exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            (folder / MADE).touch()
    return folder
