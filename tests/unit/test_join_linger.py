"""A process other than 0 whose join failed waits for process 0's report before it exits (Open MPI ends the
job at the first non-zero exit: seen in a full-suite run, process 0 was killed by SIGTERM before its report)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from jax_rocm7_plugin._cluster.preflight import join
from jax_rocm7_plugin._cluster.preflight.options import Here


def _probe(port: int) -> join.CoordinatorProbe:
    probe = join.CoordinatorProbe(f"127.0.0.1:{port}")
    probe.stop()
    return probe


def test_it_waits_until_the_coordinator_closes_and_then_a_moment_for_the_report() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    threading.Timer(1.0, server.close).start()
    started = time.monotonic()
    _probe(port).linger_for_process_0()
    waited = time.monotonic() - started
    assert 1.0 + join.LINGER_AFTER_CLOSE_SECONDS - 0.1 <= waited < join.LINGER_SECONDS, waited


def test_it_never_waits_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(join, "LINGER_SECONDS", 2.0)
    with socket.create_server(("127.0.0.1", 0)) as server:
        started = time.monotonic()
        _probe(server.getsockname()[1]).linger_for_process_0()
        waited = time.monotonic() - started
    assert join.LINGER_SECONDS - 0.1 <= waited < join.LINGER_SECONDS + 1.0, waited


@pytest.fixture
def polled(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set once the probe's thread has polled (its one poll: POLL_SECONDS is made longer than the test)."""
    monkeypatch.setattr(join, "POLL_SECONDS", 60.0)
    event = threading.Event()
    original = join.CoordinatorProbe._answers

    def recorded(self: join.CoordinatorProbe) -> bool:
        answer = original(self)
        event.set()
        return answer

    monkeypatch.setattr(join.CoordinatorProbe, "_answers", recorded)
    return event


def test_a_coordinator_that_came_up_between_two_polls_counts_as_answered(polled: threading.Event) -> None:
    """The join failed moments after process 0 came up: the probe's last poll was before it. CI met it as "nothing
    answered" beside process 0's report that this process had joined."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))  # bound, not listening: a connection is refused
        probe = join.CoordinatorProbe(f"127.0.0.1:{server.getsockname()[1]}")
        assert polled.wait(5.0) and not probe.seen_up
        server.listen()
        assert probe.answered()


def test_a_coordinator_that_never_came_up_is_not_answered() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        probe = join.CoordinatorProbe(f"127.0.0.1:{server.getsockname()[1]}")
        time.sleep(0.3)
        started = time.monotonic()
        assert not probe.answered()
        assert time.monotonic() - started < 3.0


def test_the_preflight_asks_the_probe_once_more_when_its_join_fails(
    polled: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verdict of a failed join (`join.join_failure`) takes the probe's last word, not what its thread saw."""
    monkeypatch.setattr(join, "LINGER_SECONDS", 0.5)  # the coordinator keeps answering: the bound ends it

    class Link:
        def stderr_text(self) -> str:
            return ""

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{server.getsockname()[1]}"
        probe = join.CoordinatorProbe(address)
        assert polled.wait(5.0) and not probe.seen_up
        server.listen()  # process 0 came up after the last poll, before the verdict
        joined = join.Joined(2, 4, address, "explicit")
        failure = join.join_failure(joined, Here(2, "node-2", 15.0), {}, Link(), {"event": "error"}, probe)  # type: ignore[arg-type]
        finding = failure.finding
    assert "answered, but not all 4 processes joined" in finding.summary, finding.summary
