"""The deep phase (--deep): the courier runs the job's collectives (_cluster/deep.py); this side follows its steps
under their deadlines and, in process 0, reads the gathered steps as figures and findings."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jax_rocm7_plugin._cluster import failures
from jax_rocm7_plugin._cluster.courier_link import CourierGone, CourierLink, death_description
from jax_rocm7_plugin._cluster.preflight.join import courier_error, courier_gone
from jax_rocm7_plugin._cluster.preflight.options import KILL_GRACE_SECONDS, Here, Options
from jax_rocm7_plugin._job.catalog import ClusterFinding
from jax_rocm7_plugin._job.phrases import processes_phrase
from jax_rocm7_plugin._record import NamedTuple

if TYPE_CHECKING:
    from jax_rocm7_plugin._cluster.collectives import DeepResult
    from jax_rocm7_plugin._job.record import ProcessRecord

WATCHDOG_SLACK_SECONDS = 15.0  # a watchdog that fired has said so by then (its probe of process 0: 4 s)


class Seen:
    """What the courier said of the steps so far: the step it is in, and (process 0) the plan and every outcome."""

    def __init__(self) -> None:
        self.step = "the backend"
        self.plan: list[dict[str, Any]] = []
        self.outcomes: dict[int, dict[str, Any]] = {}


class Gathered(NamedTuple):
    """Process 0's reading of the deep steps: the result (None where the courier failed before any), the findings,
    and the steps as gathered (for --trace)."""

    result: DeepResult | None
    findings: list[ClusterFinding]
    steps: list[dict[str, Any]]


def deep_plan(options: Options, host: str) -> dict[str, Any] | None:
    """What the courier is asked to run (None: no --deep)."""
    from jax_rocm7_plugin._cluster.collectives import DEFAULT_SIZES

    if not options.deep:
        return None
    sizes = options.sizes or DEFAULT_SIZES
    return {"platform": options.platform, "sizes": list(sizes), "step_timeout": options.step_timeout, "host": host}


def follow(link: CourierLink, last: str, options: Options, seen: Seen, say: Callable[[str], None]) -> dict[str, Any]:
    """The courier's events until `last` (or an error), each step said with --verbose. Besides the whole run's
    deadline, each phase has its own: a step ends by its deadline (the courier's watchdog), where process 0 then
    gathers; the report's wait is bounded too. A courier silent for longer is stopped or hung. What process 0's
    courier hands on as it comes (the plan, the outcomes) is kept in `seen`."""
    from jax_rocm7_plugin._cluster.deep import longest_run, report_seconds

    timeout = options.step_timeout
    sizes = list((deep_plan(options, "") or {"sizes": []})["sizes"])
    deadline = time.time() + longest_run(sizes, timeout) + KILL_GRACE_SECONDS
    phase_ends = time.time() + timeout + WATCHDOG_SLACK_SECONDS  # the first step comes at once
    wanted = (last, "deep-step", "deep-report", "deep-plan", "deep-seen")
    while True:
        event = link.wait_for(wanted, min(deadline, phase_ends))
        kind = event["event"]
        if kind == "deep-plan":
            seen.plan = list(event["steps"])
        elif kind == "deep-seen":
            for index, outcomes in event["outcomes"].items():
                seen.outcomes.setdefault(int(index), {}).update(outcomes)
        elif kind == "deep-report":
            seen.step = "the report"
            say("deep report")
            phase_ends = time.time() + report_seconds(timeout) + KILL_GRACE_SECONDS
        elif kind == "deep-step":
            seen.step = str(event.get("name"))
            # By then the courier's watchdog has fired and said so (deep-report); a courier silent past it is
            # stopped, or wedged in a call that never lets the watchdog run.
            phase_ends = time.time() + timeout + WATCHDOG_SLACK_SECONDS
            say(f"deep step {event.get('name')}")
        else:
            return event


def gather(
    link: CourierLink,
    options: Options,
    expected: int,
    host_of: Mapping[int, str],
    here: Here,
    environ: Mapping[str, str],
    say: Callable[[str], None],
) -> Gathered:
    """Process 0: the courier's gathering of the deep steps, read as figures and findings. Where jaxlib ended the
    courier first (the service declared a process dead), the steps seen until then, and who died."""
    from jax_rocm7_plugin._cluster.collectives import read_lost, read_steps

    seen = Seen()
    timeout, shared = options.step_timeout, options.deep_on_cpu  # the hosts' CPUs: shared by each host's processes
    try:
        event = follow(link, "deep", options, seen, say)
    except CourierGone as gone:
        steps = [{**step, "outcomes": seen.outcomes.get(i, {})} for i, step in enumerate(seen.plan)]
        loss = failures.service_loss(link.stderr_text()) if gone.why == "exited" else None
        if loss is not None and loss.dead:
            result = read_lost(steps, expected, host_of, timeout, loss.dead, loss.line, shared)
            return Gathered(result, list(result.findings), steps)
        result = read_lost(steps, expected, host_of, timeout, (), "", shared)
        lost = courier_gone(link, gone, f"the deep steps ({seen.step})", here)
        return Gathered(result, [*result.findings, lost], steps)
    if event["event"] == "error":
        return Gathered(None, [courier_error(link, event, here, environ)], [])
    steps = list(event["steps"])
    result = read_steps(steps, expected, host_of, timeout, shared)
    return Gathered(result, list(result.findings), steps)


def judged(
    gathered: Gathered, found: Sequence[ClusterFinding], records: Mapping[int, ProcessRecord], options: Options
) -> list[ClusterFinding]:
    """The deep findings with what RCCL's own log and the fabric's line rate say, less what a host's health already
    explains (`found`: the comparison's findings)."""
    from jax_rocm7_plugin._job.compare import below_line_rate, explained_by_health, rccl_findings

    findings = gathered.findings
    if gathered.result is not None:
        findings = [
            *findings,
            *rccl_findings(gathered.result.rccl, records),
            *(below_line_rate(gathered.result.figures, records) if not options.deep_on_cpu else ()),
        ]
    return explained_by_health(findings, found, records)


def lost_while_following(link: CourierLink, gone: CourierGone, step: str, coordinator: str) -> str:
    """A process other than 0 whose deep courier ended early: who jax's failure detection blamed, if it did."""
    if gone.why == "deadline":
        return f"the deep steps' courier ran past its deadline in {step} (it is stopped or hung)"
    loss = failures.service_loss(link.stderr_text())
    if loss is not None and loss.dead:
        return (
            f"jax's coordination service declared {processes_phrase(list(loss.dead))} dead during "
            f"{step}, and jax ended this process's client; process 0 reports the job"
        )
    if loss is not None and loss.coordinator_lost:
        return (
            f"process 0 (the coordinator at {coordinator}, which holds jax's coordination service) stopped "
            f"answering during {step}: it is stopped, killed, or its host is gone; no report will come from it"
        )
    return f"the deep steps' courier {death_description(gone.returncode)} during {step}"
