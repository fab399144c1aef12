"""How the build talks: step lines with elapsed time, byte counters, and BuildError for what a user can fix."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


class BuildError(Exception):
    """A problem the user can fix; printed as one line, exit status 1."""


class Progress:
    """Step lines with elapsed time, and a byte counter for long copies."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def step(self, message: str) -> None:
        print(f"[{time.monotonic() - self.start:6.1f}s] {message}", flush=True)

    def bytes_callback(self, label: str, total: int) -> Callable[[int], None]:
        marks = {total * k // 10 for k in range(1, 11)} if total else set()
        tty = sys.stdout.isatty()
        state = {"next": 1}

        def report(done: int) -> None:
            decile = done * 10 // total if total else 10
            if decile >= state["next"] or done in marks:
                state["next"] = decile + 1
                line = f"    {label}: {done / 1e6:8.1f} / {total / 1e6:.1f} MB ({decile * 10}%)"
                print(("\r" + line) if tty else line, end="" if tty and done < total else "\n", flush=True)

        return report
