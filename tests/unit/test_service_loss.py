"""What jax's own failure detection decided, read from a courier's log (_cluster/failures.py), and the deep steps
read from what process 0's courier had seen when jaxlib ended it (_cluster/collectives.read_lost).

The log lines are jaxlib's own, as its coordination client printed them here when the service declared a stopped
task dead (jax 0.10.2 and 0.12.0 print the same words; 0.12.0 adds a source location trace) and when the client's
own heartbeats to a stopped process 0 ran out."""

from __future__ import annotations

from typing import Any

from jax_rocm7_plugin._cluster.collectives import read_lost
from jax_rocm7_plugin._cluster.failures import ended_by_jax, last_error_line, service_loss

FATAL = (
    "F1125 15:05:21.639415    8673 client.h:86] Terminating process because the JAX distributed service detected "
    "fatal errors. This most likely indicates that another task died; see the other task logs for more details. "
    "Disable Python buffering, i.e. `python -u`, to be sure to see all the previous output. absl::Status: "
)
POLLED = (
    "E1125 15:05:21.639255    8673 coordination_service_agent.cc:288] Polled an error from coordination service "
    "(this can be an error from this or another task).\n"
)
DECLARED_DEAD = (
    POLLED + FATAL + "UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):\n2\nThe tasks "
    "have crashed. Check the task logs for an earlier error, or scheduler events (e.g. preemption, eviction) to debug "
    "further.\nRPC: /xla.coordination.CoordinationService/PollForError [type.googleapis.com/tensorflow.Coordination"
    "ServiceError='']\n=== Source Location Trace: ===\nexternal/xla+/xla/pjrt/distributed/coordination/coordination_"
    "service_error_util.cc:64\n*** Check failure stack trace: ***\n"
)
COORDINATOR_GONE = (
    FATAL + "DEADLINE_EXCEEDED: Deadline Exceeded\nRPC: /xla.coordination.CoordinationService/Heartbeat\n"
    "*** Check failure stack trace: ***\n"
)

LEADER_GONE = (  # process 0 killed: the socket closed under the client's poll
    POLLED + FATAL + "UNAVAILABLE: Failed to send RPC to coordination service. Either the leader task was "
    "preempted/died/restarted unexpectedly or this task is experiencing network issues. Check earlier logs from 1) "
    "this task, 2) the leader (usually slice 0 task 0), and 3) cluster scheduler to debug further.\nAdditional GRPC "
    "error information from remote target coordination_service while calling /xla.coordination.CoordinationService/"
    "PollForError:\n:UNAVAILABLE:Stream removed (Socket closed)\n"
)


def test_the_tasks_the_service_declared_dead_are_read_from_any_clients_log() -> None:
    loss = service_loss(DECLARED_DEAD)
    assert loss is not None and loss.dead == (2,) and not loss.coordinator_lost
    assert loss.line == "jax's coordination service: task 2 stopped sending heartbeats"
    several = DECLARED_DEAD.replace("heartbeats):\n2\n", "heartbeats):\n/job:jax_worker/replica:0/task:3\n1\n")
    assert service_loss(several).dead == (1, 3)  # type: ignore[union-attr]


def test_a_client_whose_heartbeats_to_process_0_failed_says_the_coordinator_is_lost() -> None:
    loss = service_loss(COORDINATOR_GONE)
    assert loss is not None and loss.dead == () and loss.coordinator_lost
    assert service_loss(LEADER_GONE).coordinator_lost  # type: ignore[union-attr]


def test_no_verdict_of_the_service_where_the_log_has_none() -> None:
    assert service_loss(POLLED) is None  # the abort of a Python callback (std::bad_cast) says no more than this
    assert service_loss("E1125 15:05:21.1 1 x.cc:1] something else\n") is None
    assert not ended_by_jax(POLLED) and ended_by_jax(DECLARED_DEAD)


def test_evidence_skips_the_fatal_handlers_own_paragraph() -> None:
    assert last_error_line(DECLARED_DEAD) == POLLED.split("] ", 1)[1].strip()


def _step(name: str, outcomes: dict[int, dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"name": name, "outcomes": {str(p): o for p, o in outcomes.items()}, **more}


def test_the_steps_seen_before_jaxlib_ended_the_courier_are_read_and_the_dead_process_named_where_it_stopped() -> None:
    ok = {"ok": True, "seconds": 0.001, "ranks": 3}
    steps = [
        _step("backend", {p: {"ok": True} for p in range(3)}),
        _step("all-reduce/8", {p: ok for p in range(3)}, op="all-reduce", bytes=8),
        _step("all-gather/8", {0: ok, 1: ok}, op="all-gather", bytes=8),  # 2 stopped inside it
        _step("all-reduce/32", {}, op="all-reduce", bytes=32),
    ]
    hosts = {0: "node-0", 1: "node-0", 2: "node-1"}
    result = read_lost(steps, 3, hosts, 60.0, (2,), "jax's coordination service: task 2 stopped sending heartbeats")
    assert [(f.op, f.bytes) for f in result.figures] == [("all-reduce", 8)]
    (hung,) = result.findings
    assert hung.id == "cluster-collective-hung" and hung.processes == (2,) and hung.hosts == ("node-1",)
    assert hung.summary.startswith("all-gather/8 did not finish: process 2 on node-1 stopped answering")
    # Nobody declared dead (the courier died of something else): the finished steps only, no finding of this kind.
    assert read_lost(steps, 3, hosts, 60.0, (), "").findings == ()
