"""One sentence for each way of not getting a job's records together, and the coordinator's view of who joined.

When registration times out, the coordination service (in process 0's courier) logs how many
processes reached the registration barrier and some of the ones that did not. That log, the
launcher's host list and the keys that never arrived are all there is to name the missing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from jax_rocm7_plugin._job import catalog
from jax_rocm7_plugin._job.catalog import ClusterFinding
from jax_rocm7_plugin._job.phrases import clipped, hosts_phrase, processes_phrase
from jax_rocm7_plugin._record import NamedTuple

_REACHED = re.compile(r"# of tasks that reached the barrier: (\d+)/(\d+)")
# After "timed out task names:", one task a line: "3", or "/job:jax_worker/replica:0/task:3".
_TIMED_OUT = re.compile(r"timed out task names:[ \t]*\n((?:[ \t]*(?:/job:\S*/task:)?\d+[ \t]*\n)+)")
_TASK = re.compile(r"(\d+)[ \t]*$", re.M)
_LAST_ERROR = re.compile(r"^[EF]\d{4} [\d:.]+\s+\d+ \S+\] (.*)$", re.M)
# jaxlib's coordination service, when a task stops heartbeating (jax 0.10.2 and 0.12.0 alike): "UNAVAILABLE: The
# following tasks are unhealthy (stopped sending heartbeats):" then one task a line ("2" or ".../task:2"). Every
# client polls that error and its process ends ("Terminating process because the JAX distributed service
# detected fatal errors ... absl::Status: ..."), process 0's service logs it first.
_UNHEALTHY = re.compile(
    r"tasks are unhealthy \(stopped sending heartbeats\):[ \t]*\n((?:[ \t]*(?:/job:\S*/task:)?\d+[ \t]*\n?)+)"
)
# A client that lost the service (in process 0's courier): its own heartbeats ran out (process 0 stopped), or an RPC
# found the socket closed (process 0 gone: "Failed to send RPC to coordination service. Either the leader task
# was preempted/died...").
_SERVICE_UNREACHABLE = re.compile(r"RPC: /\S*CoordinationService/Heartbeat|Failed to send RPC to coordination service")
_FATAL = "the JAX distributed service detected fatal errors"
START_MISSING = (
    "start the missing processes (the launcher's log names why they did not start: a failed node, a pod that "
    "was not scheduled, a crash before this command ran), or raise --timeout when processes start slowly"
)


def coordinator_view(service_log: str) -> tuple[int | None, int | None, tuple[int, ...]]:
    """(joined, expected, ids that did not join) as the coordination service logged them; Nones if it did not."""
    reached = _REACHED.findall(service_log)
    if not reached:
        return None, None, ()
    joined, expected = (int(n) for n in reached[-1])
    named = _TIMED_OUT.findall(service_log)
    ids = tuple(sorted({int(t) for t in _TASK.findall(named[-1])})) if named else ()
    return joined, expected, tuple(i for i in ids if i < expected)


def last_error_line(log: str) -> str | None:
    """The last error jaxlib logged (glog's E/F lines), for evidence."""
    found = _LAST_ERROR.findall(log)
    # jaxlib's fatal handler repeats an earlier error behind a paragraph of its own: the earlier line says it.
    found = [line for line in found if not line.startswith("Terminating process because")] or found
    return clipped(found[-1].strip(), 300) if found else None


class ServiceLoss(NamedTuple):
    """Why jax's coordination client ended its process, as its log says: the tasks the service declared dead
    (stopped heartbeating), or the service itself unreachable (process 0 frozen or gone)."""

    dead: tuple[int, ...]  # process ids the service declared dead; () when it named none
    coordinator_lost: bool  # this client's heartbeats to the service failed
    line: str  # the log's own words, for evidence


def ended_by_jax(log: str) -> bool:
    """Whether jaxlib's fatal handler ended the courier for a failure of the job it reports (a join that timed
    out, a task declared dead), not a crash of its own."""
    return _FATAL in log


def service_loss(log: str) -> ServiceLoss | None:
    """What jax's failure detection decided, where a courier's log shows it ended the process; None otherwise."""
    unhealthy = _UNHEALTHY.findall(log)
    if unhealthy:
        dead = tuple(sorted({int(t) for t in _TASK.findall(unhealthy[-1])}))
        tasks = f"task{'s' if len(dead) > 1 else ''} {', '.join(map(str, dead))}"
        return ServiceLoss(dead, False, f"jax's coordination service: {tasks} stopped sending heartbeats")
    if _SERVICE_UNREACHABLE.search(log) and ended_by_jax(log):
        return ServiceLoss((), True, last_error_line(log) or "heartbeats to the coordination service failed")
    return None


def _hosts_of(missing: Sequence[int], launcher_hosts: dict[int, str] | None) -> tuple[str, ...]:
    if not launcher_hosts:
        return ()
    return tuple(sorted({launcher_hosts[p] for p in missing if p in launcher_hosts}))


def _where(hosts: tuple[str, ...]) -> str:
    return f" (on {hosts_phrase(hosts)}, by the launcher's host list)" if hosts else ""


def never_joined(
    expected: int, seconds: float, service_log: str, launcher_hosts: dict[int, str] | None
) -> tuple[ClusterFinding, tuple[int, ...], int | None]:
    """Process 0: registration did not complete. The finding, the ids known to be missing, and how many joined
    as the coordination service counted them (None where its log does not say)."""
    joined, _, missing = coordinator_view(service_log)
    evidence = tuple(line for line in (last_error_line(service_log),) if line)
    if joined is None:
        summary = f"not every one of the {expected} processes joined within {seconds:.0f} s"
        return catalog.incomplete(summary, START_MISSING, (), (), evidence), (), None
    absent = expected - joined
    named = f": {processes_phrase(missing)}" if missing else ""
    more = f" and {absent - len(missing)} more" if missing and absent > len(missing) else ""
    hosts = _hosts_of(missing, launcher_hosts)
    summary = f"{joined} of {expected} processes joined within {seconds:.0f} s; {absent} never did"
    summary += f"{named}{more}{_where(hosts)}"
    return catalog.incomplete(summary, START_MISSING, missing, hosts, evidence), missing, joined


def did_not_report(
    expected: int, missing: Sequence[int], seconds: float, launcher_hosts: dict[int, str] | None
) -> ClusterFinding:
    """Process 0: every process joined, some records never came (they died or hung after joining)."""
    hosts = _hosts_of(missing, launcher_hosts)
    summary = (
        f"all {expected} processes joined, but {processes_phrase(missing)}{_where(hosts)} did not report within "
        f"{seconds:.0f} s: {'it' if len(missing) == 1 else 'they'} died or hung after joining"
    )
    fix = "look at those processes' output and exit status in the launcher's log (a crash, an OOM kill, a hang)"
    return catalog.incomplete(summary, fix, tuple(missing), hosts, ())


def port_in_use(port: str, host: str, evidence: tuple[str, ...] = ()) -> ClusterFinding:
    return catalog.join_failed(
        f"the coordinator's port {port} is already in use on {host}",
        f"choose another port (--coordinator-address HOST:PORT, or JAX_COORDINATOR_PORT under Slurm and Open MPI), "
        f"or end what holds it (ss -ltnp 'sport = :{port}')",
        0,
        host,
        evidence,
    )


def does_not_resolve(address: str, why: str, process: int | None, host: str) -> ClusterFinding:
    return catalog.join_failed(
        f"the coordinator address {address} does not resolve on {host} ({why})",
        "give a host name every node resolves (check /etc/hosts and DNS on this node) or an IP address",
        process,
        host,
        (),
    )


def could_not_join(
    address: str, expected: int, seconds: float, seen_up: bool, loopback: bool, process: int, host: str
) -> ClusterFinding:
    """A process other than 0 whose join failed: whether the coordinator ever answered tells which failure."""
    if seen_up:
        summary = (
            f"the coordinator at {address} answered, but not all {expected} processes joined within {seconds:.0f} s "
            "(process 0's report names the missing ones)"
        )
        fix = START_MISSING
    else:
        summary = (
            f"nothing answered at the coordinator address {address} for {seconds:.0f} s from {host}: process 0 did "
            "not start, died, or cannot be reached from here"
        )
        if loopback:
            summary += f" ({address} is a loopback address: from each host it reaches only that host)"
        fix = "check that process 0 runs and that this host reaches its address and port (firewall, routing)"
    return catalog.join_failed(summary, fix, process, host, ())


def courier_died(death: str, stage: str, log: str, process: int | None, host: str) -> ClusterFinding:
    detail = last_error_line(log)
    summary = f"jax's coordination client {death} while {stage}" + (f": {detail}" if detail else "")
    return catalog.join_failed(
        summary,
        "run again with --verbose to see the client's log; if it repeats, report it with that log",
        process,
        host,
        (detail,) if detail else (),
    )


def no_verdict(address: str, seconds: float, process: int, host: str, why: str) -> ClusterFinding:
    return catalog.join_failed(
        f"process 0 (the coordinator at {address}) gave no verdict within {seconds:.0f} s: it may have died ({why})",
        "look at process 0's output and exit status in the launcher's log",
        process,
        host,
        (),
    )
