"""The coordination service's key-value store as a job's processes use it: each process publishes under a
directory of keys ending in its process id, and one process reads what has come by a deadline.

Reading by deadline needs care. A blocking read handed the last few milliseconds of a deadline can run out
before the service answers even though the key is there: on this machine's two cores under load, 48 of 200
reads of a present key with a 1 ms wait failed (DEADLINE_EXCEEDED), none when idle. Where those reads decide
who "never reported", a process that did publish was named beside the one that had not. So the blocking reads
stop at the first that runs out, and one listing of the directory (a plain call with no short deadline of its
own) takes whatever has come.

A listing answers for every process that has published, a blocking read for one. Where more than two are wanted,
one listing comes first and the reads wait only for the processes missing from it: process 0 of a job whose
processes arrived together makes one call instead of one per process (benchmarks/job_check.py --collect).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Protocol

# From this many processes wanted, a listing comes first. Measured with jaxlib 0.10.2 on this machine, process 0
# (which serves the calls too) pays 0.65 ms for a listing of 50 records of 1.5 KB, 0.4 ms for a blocking read.
LIST_FIRST_FROM = 3


class Store(Protocol):
    """What our protocols need of jax's DistributedRuntimeClient."""

    def key_value_set(self, key: str, value: str, allow_overwrite: bool = False) -> None: ...

    def blocking_key_value_get(self, key: str, timeout_in_ms: int) -> str: ...

    def key_value_dir_get(self, key: str) -> list[tuple[str, str]]: ...


def wait_ms(seconds: float) -> int:
    """A blocking read's wait: jaxlib takes whole milliseconds, at least one."""
    return max(1, int(seconds * 1000))


def process_of(key: str) -> int:
    """The process id that ends a published key; -1 where the key ends otherwise."""
    tail = key.rstrip("/").rsplit("/", 1)[-1]
    return int(tail) if tail.isascii() and tail.isdigit() else -1  # '²' is a digit to str.isdigit, not to int()


def read_published(
    store: Store,
    directory: str,
    processes: Iterable[int],
    deadline: float,
    clock: Callable[[], float] = time.monotonic,
) -> dict[int, str]:
    """What each of `processes` published at `<directory>/<process>` by `deadline` (on `clock`): one listing first
    where LIST_FIRST_FROM or more are wanted, a blocking read per process still missing in order while time is
    left, then one listing of the directory for the rest. A process missing from the answer had published
    nothing when the last listing ran."""
    wanted = list(processes)
    wanted_set = set(wanted)
    found: dict[int, str] = {}
    base = directory.rstrip("/")
    if len(wanted) >= LIST_FIRST_FROM:
        found.update(_listed(store, base, wanted_set))
    for process in wanted:
        if process in found:
            continue
        remaining = deadline - clock()
        if remaining <= 0:
            break
        try:
            found[process] = store.blocking_key_value_get(f"{base}/{process}", wait_ms(remaining))
        except Exception:  # noqa: BLE001 - jaxlib raises its runtime error when the wait runs out
            break
    if len(found) < len(wanted):
        for process, value in _listed(store, base, wanted_set).items():
            found.setdefault(process, value)
    return found


def _listed(store: Store, base: str, wanted: set[int]) -> dict[int, str]:
    """One listing of `<base>/`: what each wanted process has published there."""
    listed = ((process_of(key), value) for key, value in store.key_value_dir_get(f"{base}/"))
    return {process: value for process, value in listed if process in wanted}
