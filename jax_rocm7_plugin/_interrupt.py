"""Ctrl-C and SIGTERM end our long-running commands (`report`, `cluster`) promptly, whatever the parent left.

A process inherits its signal mask and ignored signals across exec: a launcher, CI runner or shell that
blocked or ignored SIGINT (a background job of a non-interactive shell ignores it) would leave `report --
CMD` deaf to Ctrl-C for the command's whole --timeout. These commands are interactive tools whose promise
is to end when told, so at start they unblock SIGINT and SIGTERM and make both raise `Interrupted` (a
KeyboardInterrupt) in the main thread; each command's own handler ends its children and their process
groups, removes what it half-wrote, says so in one line, and exits 128 + the signal's number. A command
that never calls this (the doctor, `import jax`) keeps the parent's choice.
"""

from __future__ import annotations

import signal
from types import FrameType

HANDLED = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; `exit_code` is what the shell reports for it (130, 143)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


_first: list[int] = []  # the signal being handled: a second one must not cut the cleanup short


def _raise(signum: int, _frame: FrameType | None) -> None:
    if _first:
        return  # the first is ending the command now (bounded: kill, wait, remove)
    _first.append(signum)
    raise Interrupted(signum)


def catch_interrupts() -> None:
    """From now on SIGINT and SIGTERM raise Interrupted in the main thread (call it there, first)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED)
    for signum in HANDLED:
        signal.signal(signum, _raise)


def exit_code(interrupt: KeyboardInterrupt) -> int:
    """130 for Ctrl-C (a plain KeyboardInterrupt too), 143 for SIGTERM."""
    return interrupt.exit_code if isinstance(interrupt, Interrupted) else 128 + signal.SIGINT
