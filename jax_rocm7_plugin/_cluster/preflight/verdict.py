"""The verdict phase: process 0 publishes the report's code and learns who never took it (then, with --deep, the
job's exit code after the steps); every other process takes it and exits with it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TextIO

from jax_rocm7_plugin._cluster import courier, failures
from jax_rocm7_plugin._cluster.courier_link import CourierGone, CourierLink, death_description
from jax_rocm7_plugin._cluster.preflight.compare import never_took
from jax_rocm7_plugin._cluster.preflight.deep import Seen, follow, lost_while_following
from jax_rocm7_plugin._cluster.preflight.join import Joined
from jax_rocm7_plugin._cluster.preflight.options import KILL_GRACE_SECONDS, Options
from jax_rocm7_plugin._cluster.report import EXIT_PROBLEMS, ClusterReport
from jax_rocm7_plugin._job.catalog import ClusterFinding
from jax_rocm7_plugin._record import NamedTuple

if TYPE_CHECKING:
    from jax_rocm7_plugin._job.record import ProcessRecord

# Process 0's courier hands the report's code to the others, then the final code (deep.VERDICT_WAIT_SECONDS and
# deep.FINAL_ACK_SECONDS), and a little more for the answer.
DEEP_VERDICT_SECONDS = 45.0


def publish(
    link: CourierLink, report: ClusterReport, records: Mapping[int, ProcessRecord], options: Options
) -> ClusterReport:
    """Process 0: the comparison's verdict out; the report with whoever never took it (without --deep: with --deep
    they are named at the step they never reached)."""
    link.send({"verdict": {"code": report.exit_code, "verdict": report.verdict}})
    wanted = ("done",) if options.deep else ("acked",)  # plain: the courier waits for the report first
    try:  # the verdict is out; the others say if they could not read it
        done = link.wait_for(wanted, time.time() + 2 * courier.ACK_GRACE_SECONDS + KILL_GRACE_SECONDS)
    except CourierGone:
        done = {}
    unread = [int(p) for p in done.get("unacked", ())]
    if unread and not options.deep:
        waited = float(done.get("waited", courier.ACK_GRACE_SECONDS))
        report = never_took(report, unread, records, "the verdict", waited)
    return report


def publish_deep(link: CourierLink, report: ClusterReport, records: Mapping[int, ProcessRecord]) -> ClusterReport:
    """Process 0, --deep: the job's exit code out after the steps; the report with whoever never took it."""
    from jax_rocm7_plugin._cluster.deep import VERDICT_WAIT_SECONDS

    with contextlib.suppress(CourierGone, OSError):  # the others exit with the report's code too
        link.send({"deep-verdict": report.exit_code})
        acked = link.wait_for(("deep-acked",), time.time() + DEEP_VERDICT_SECONDS)
        unread = [int(p) for p in acked.get("unacked", ())]
        if unread:
            waited = float(acked.get("waited", VERDICT_WAIT_SECONDS))
            report = never_took(report, unread, records, "the job's exit code", waited)
    return report


def printed_then_final(link: CourierLink, show: Callable[[], int], last: str, seconds: float) -> int:
    """Process 0: the report out first (`show`), then the courier hands the others the job's code and waits (bounded)
    until they took it. Under mpirun the first process to exit non-zero ends the whole job, this one too."""
    code = show()
    link.send({"printed": True})
    with contextlib.suppress(CourierGone, OSError):
        link.wait_for((last,), time.time() + seconds + KILL_GRACE_SECONDS)
    return code


class Awaited(NamedTuple):
    code: int | None  # the exit code taken (None: no verdict came)
    no_verdict: ClusterFinding | None = None  # why none came


def await_verdict(
    link: CourierLink,
    joined: Joined,
    options: Options,
    deadline: float,
    host: str,
    err: TextIO,
    say: Callable[[str], None],
) -> Awaited:
    """A process other than 0: process 0's verdict, then (--deep) the steps and the job's code; the code to exit
    with."""
    try:
        event = link.wait_for(("verdict",), deadline + courier.ACK_GRACE_SECONDS + KILL_GRACE_SECONDS)
        why = str(event.get("message", ""))[:200] if event["event"] == "error" else None
    except CourierGone as gone:
        why = "the deadline passed" if gone.why == "deadline" else f"the client {death_description(gone.returncode)}"
    if why is not None:
        return Awaited(None, failures.no_verdict(joined.coordinator, options.timeout, joined.process_id, host, why))
    verdict = event["verdict"]
    say(f"process 0's verdict: {verdict.get('verdict')}")
    if options.deep:  # the courier runs the deep steps now; process 0 reports them, and the code
        seen = Seen()
        try:
            done = follow(link, "deep-done", options, seen, say)
            code = int(done.get("code", EXIT_PROBLEMS)) if done["event"] == "deep-done" else EXIT_PROBLEMS
            if done.get("why"):
                err.write(f"cluster preflight, process {joined.process_id}: {done['why']}\n")
        except CourierGone as gone:
            lost = lost_while_following(link, gone, seen.step, joined.coordinator)
            err.write(f"cluster preflight, process {joined.process_id}: {lost}\n")
            code = EXIT_PROBLEMS
        link.close(time.time() + KILL_GRACE_SECONDS)
        return Awaited(code if code in (0, 1, 2) else EXIT_PROBLEMS)
    code = verdict.get("code")
    with contextlib.suppress(CourierGone):  # process 0's final code: 1 where a process never took the verdict
        final = link.wait_for(("final",), time.time() + 2 * courier.ACK_GRACE_SECONDS + KILL_GRACE_SECONDS)
        if final.get("code") is not None:
            code = final["code"]
    link.close(time.time() + KILL_GRACE_SECONDS)
    return Awaited(code if code in (0, 1, 2) else EXIT_PROBLEMS)
