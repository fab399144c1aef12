"""The compare phase (process 0): the gathered records read (one that cannot be read counts as missing), who never
reported, and the job's comparison (_job/compare.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jax_rocm7_plugin._cluster import failures
from jax_rocm7_plugin._cluster.preflight.join import Joined
from jax_rocm7_plugin._cluster.preflight.options import Options
from jax_rocm7_plugin._cluster.report import ClusterReport
from jax_rocm7_plugin._job import catalog
from jax_rocm7_plugin._job.catalog import ClusterFinding
from jax_rocm7_plugin._job.phrases import hosts_phrase, processes_phrase
from jax_rocm7_plugin._record import NamedTuple

if TYPE_CHECKING:
    from jax_rocm7_plugin._job.record import ProcessRecord


class Compared(NamedTuple):
    records: dict[int, ProcessRecord]  # by process id: those that could be read
    missing: tuple[int, ...]  # never reported, or reported what is no record
    findings: list[ClusterFinding]
    hosts: tuple[str, ...]


def compare_gathered(
    gathered: Mapping[str, Any], joined: Joined, options: Options, environ: Mapping[str, str]
) -> Compared:
    """`gathered`: the courier's event ({"records": {process: text}, "missing": [process]})."""
    from jax_rocm7_plugin._cluster.launcher import slurm_hosts
    from jax_rocm7_plugin._job.compare import compare
    from jax_rocm7_plugin._job.record import decode

    records: dict[int, ProcessRecord] = {}
    shared: dict[str, dict[str, Any]] = {}
    for key, text in gathered["records"].items():
        with contextlib.suppress(ValueError):  # a record that is none counts as missing
            records[int(key)] = decode(text, shared)
    unread = (int(k) for k in gathered["records"] if int(k) not in records)
    missing = tuple(sorted({*gathered["missing"], *unread}))
    findings: list[ClusterFinding] = []
    if missing:
        launcher = slurm_hosts(environ, joined.expected) if joined.method == "slurm" else None
        findings.append(failures.did_not_report(joined.expected, missing, options.timeout, launcher))
    findings.extend(for_this_run(compare(records), options))
    hosts = tuple(sorted({r.host for r in records.values()}))
    return Compared(records, missing, findings, hosts)


def for_this_run(findings: list[ClusterFinding], options: Options) -> list[ClusterFinding]:
    """`--deep --platform cpu` runs the job's collectives on jax's CPU backend: a ROCm backend that would not come up
    is said (info), but does not decide that run's exit code."""
    if not options.deep_on_cpu:
        return findings
    return [
        f._replace(severity="info", summary=f"{f.summary} (not needed by this --platform cpu run)")
        if f.id == "cluster-backend-unavailable"
        else f
        for f in findings
    ]


def never_took(
    report: ClusterReport, unread: Sequence[int], records: Mapping[int, ProcessRecord], what: str, seconds: float
) -> ClusterReport:
    """Processes that handed everything in but never took `what` (stopped or gone at the end)."""
    hosts = tuple(sorted({records[p].host for p in unread if p in records}))
    finding = catalog.incomplete(
        f"{processes_phrase(unread)} on {hosts_phrase(hosts)} stopped answering at the end: "
        f"{'it' if len(unread) == 1 else 'they'} never took {what} within {seconds:g} s (stopped, killed or "
        "hung); the others exited with the code they took",
        "look at the processes named (their host's dmesg, the job's log of that rank, the launcher's exit status)",
        tuple(unread),
        hosts,
        (),
    )
    return report._replace(findings=(*report.findings, finding))
