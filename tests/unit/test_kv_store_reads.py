"""Reading what a job's processes published by a deadline (_job/store.py), over the in-memory store fixture."""

from __future__ import annotations

import threading
import time

import pytest

from jax_rocm7_plugin._job.store import process_of, read_published, wait_ms
from tests.support.kv_store import Store


def published(*processes: int, answer_seconds: float = 0.0) -> Store:
    store = Store(answer_seconds)
    for process in processes:
        store.key_value_set(f"job/step/{process}", f"outcome of {process}")
    return store


def test_two_published_processes_are_read_without_a_listing() -> None:
    store = published(0, 1)
    found = read_published(store, "job/step", range(2), time.monotonic() + 5)
    assert found == {p: f"outcome of {p}" for p in range(2)}
    assert (store.listings, store.reads) == (0, 2)


def test_many_published_processes_are_read_by_one_listing() -> None:
    store = published(*range(8))
    found = read_published(store, "job/step", range(1, 8), time.monotonic() + 5)
    assert found == {p: f"outcome of {p}" for p in range(1, 8)}
    assert (store.listings, store.reads) == (1, 0)


def test_after_the_listing_only_the_missing_processes_are_waited_for() -> None:
    store = published(1, 2, 4)
    later = threading.Timer(0.1, store.key_value_set, args=("job/step/3", "late"))
    later.start()
    try:
        found = read_published(store, "job/step", range(1, 5), time.monotonic() + 5)
    finally:
        later.cancel()
    assert found == {1: "outcome of 1", 2: "outcome of 2", 3: "late", 4: "outcome of 4"}
    assert (store.listings, store.reads) == (1, 1)


def test_a_silent_process_is_waited_for_until_the_deadline_and_the_later_ones_still_count() -> None:
    store = published(0, 2, 3, answer_seconds=0.05)  # the service answers slowly, as under load
    began = time.monotonic()
    found = read_published(store, "job/step", range(4), began + 0.3)
    assert sorted(found) == [0, 2, 3]  # 2 and 3 published: read by the listing though no time was left
    assert 0.29 <= time.monotonic() - began < 2  # waits are whole milliseconds, rounded down


def test_a_deadline_already_passed_reads_what_is_there() -> None:
    store = published(1, answer_seconds=0.05)
    assert read_published(store, "job/step/", range(3), time.monotonic() - 1) == {1: "outcome of 1"}


def test_a_process_publishing_during_the_wait_is_read() -> None:
    store = published(0)
    later = threading.Timer(0.1, store.key_value_set, args=("job/step/1", "late"))
    later.start()
    try:
        assert read_published(store, "job/step", range(2), time.monotonic() + 5) == {0: "outcome of 0", 1: "late"}
    finally:
        later.cancel()


def test_only_the_processes_asked_for_and_only_that_directory() -> None:
    store = published(0, 1, 7)
    store.key_value_set("job/step10/1", "another step")
    store.key_value_set("job/step/abort", "1")
    found = read_published(store, "job/step", [1, 2], time.monotonic() - 1)
    assert found == {1: "outcome of 1"}


@pytest.mark.parametrize(("key", "process"), [("a/b/3", 3), ("a/b/12/", 12), ("a/b/abort", -1), ("7", 7)])
def test_process_of(key: str, process: int) -> None:
    assert process_of(key) == process


def test_waits_are_whole_milliseconds_and_never_zero() -> None:
    assert [wait_ms(s) for s in (0.0, -1.0, 0.0004, 1.5)] == [1, 1, 1, 1500]
