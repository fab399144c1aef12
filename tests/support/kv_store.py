"""An in-memory stand-in for jax's coordination service key-value store (test fixture, never shipped): keys set
once, blocking reads that wait until their deadline, prefix listing. `answer_seconds` imitates the time the real
service takes to answer under load: a blocking read whose wait is shorter runs out even when the key is there
(jaxlib's client does so: DEADLINE_EXCEEDED for a present key read with a 1 ms wait, see _job/store.py)."""

from __future__ import annotations

import threading
import time


class Store:
    def __init__(self, answer_seconds: float = 0.0) -> None:
        self.values: dict[str, str] = {}
        self.changed = threading.Condition()
        self.answer_seconds = answer_seconds
        self.listings = 0
        self.reads = 0  # blocking reads asked for

    def key_value_set(self, key: str, value: str, allow_overwrite: bool = False) -> None:
        with self.changed:
            if key in self.values and not allow_overwrite:
                raise RuntimeError(f"ALREADY_EXISTS: {key}")
            self.values[key] = value
            self.changed.notify_all()

    def blocking_key_value_get(self, key: str, timeout_in_ms: int) -> str:
        self.reads += 1
        if timeout_in_ms / 1000 < self.answer_seconds:
            time.sleep(timeout_in_ms / 1000)
            raise RuntimeError(f"DEADLINE_EXCEEDED: GetKeyValue() timed out with key: {key}")
        deadline = time.monotonic() + timeout_in_ms / 1000
        with self.changed:
            while key not in self.values:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"DEADLINE_EXCEEDED: {key}")
                self.changed.wait(left)
            return self.values[key]

    def key_value_dir_get(self, key: str) -> list[tuple[str, str]]:
        with self.changed:
            self.listings += 1
            return [(k, v) for k, v in sorted(self.values.items()) if k.startswith(key)]
