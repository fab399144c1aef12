"""The cluster preflight's findings: what makes a job of many processes fail, hang or run short, and the fix.

Ids are public (a closed set, listed in the README; a test checks the list). Each finding names
the processes and hosts it concerns: for a mismatch, those outside the largest group.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, get_args

from jax_rocm7_plugin._findings import Concerns, Severity
from jax_rocm7_plugin._names import PLUGIN_DISTRIBUTION
from jax_rocm7_plugin._record import NamedTuple

ClusterFindingId = Literal[
    "cluster-usage-invalid",
    "cluster-join-failed",
    "cluster-incomplete",
    "cluster-record-taken",
    "cluster-backend-unavailable",
    "cluster-version-mismatch",
    "cluster-library-mismatch",
    "cluster-rocm-mismatch",
    "cluster-gpu-arch-mismatch",
    "cluster-gpu-count-mismatch",
    "cluster-device-ids-invalid",
    "cluster-visible-devices-invalid",
    "cluster-gpu-shared",
    "cluster-gpus-not-partitioned",
    "cluster-too-many-local-processes",
    "cluster-env-mismatch",
    "cluster-socket-ifname-missing",
    "cluster-rdma-partial",
    "cluster-coordinator-loopback",
    "cluster-shm-too-small",
    "cluster-open-files-low",
    "cluster-known-issue",
    "cluster-gpu-degraded",
    "cluster-node-unlike-peers",
    "cluster-transport-unlike-peers",
    "cluster-transport-slower",
    "cluster-collective-hung",
    "cluster-collective-wrong",
    "cluster-process-slow",
    "cluster-link-slow",
    "cluster-deep-failed",
    "cluster-internal-error",
]
CLUSTER_FINDING_IDS: tuple[ClusterFindingId, ...] = get_args(ClusterFindingId)


class ClusterFinding(NamedTuple):
    id: ClusterFindingId
    severity: Severity
    summary: str
    fix: str
    processes: tuple[int, ...] = ()
    hosts: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    known_issue: str | None = None  # the known_issues.json entry, for cluster-known-issue
    concerns: Concerns | None = None  # beyond processes and hosts: the GPUs, the attribute that differs and its values

    @property
    def is_problem(self) -> bool:
        """Errors and warnings fail the preflight (exit 1); info does not."""
        return self.severity != "info"

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "severity": self.severity,
            "summary": self.summary,
            "fix": self.fix,
            "processes": list(self.processes),
            "hosts": list(self.hosts),
            "evidence": list(self.evidence),
            **({"known_issue": self.known_issue} if self.known_issue is not None else {}),
            **({"concerns": concerns} if self.concerns is not None and (concerns := self.concerns.to_json()) else {}),
        }


def usage_invalid(summary: str, fix: str, evidence: tuple[str, ...] = ()) -> ClusterFinding:
    return ClusterFinding("cluster-usage-invalid", "error", summary, fix, evidence=evidence)


def join_failed(summary: str, fix: str, process: int | None, host: str, evidence: tuple[str, ...]) -> ClusterFinding:
    processes = (process,) if process is not None else ()
    return ClusterFinding("cluster-join-failed", "error", summary, fix, processes, (host,), evidence)


def incomplete(
    summary: str, fix: str, missing: tuple[int, ...], hosts: tuple[str, ...], evidence: tuple[str, ...]
) -> ClusterFinding:
    return ClusterFinding("cluster-incomplete", "error", summary, fix, missing, hosts, evidence)


def record_taken(processes: tuple[int, ...], hosts: tuple[str, ...], evidence: tuple[str, ...]) -> ClusterFinding:
    """Something else wrote a record under these processes' ids before they did (the service sets a key once): two
    processes launched with one id, or a writer that is no process of this job. Whose record is whose cannot be
    told, so theirs are compared with no one's."""
    from jax_rocm7_plugin._job.phrases import processes_phrase

    named = processes_phrase(processes)
    return ClusterFinding(
        "cluster-record-taken",
        "error",
        f"the job check's record key of {named} was already set when {'it' if len(processes) == 1 else 'they'} "
        f"wrote {'its' if len(processes) == 1 else 'their'} own: two processes were given one process id, or "
        "something that is no process of this job writes to the coordination service",
        "give every process its own id (the launcher's rank: SLURM_PROCID, OMPI_COMM_WORLD_RANK, the JobSet's "
        "index), and let only this job's processes reach the coordinator's port",
        processes,
        hosts,
        evidence,
    )


def mismatch(
    finding_id: ClusterFindingId,
    severity: Severity,
    summary: str,
    fix: str,
    processes: tuple[int, ...],
    hosts: tuple[str, ...],
    evidence: tuple[str, ...] = (),
    concerns: Concerns | None = None,
) -> ClusterFinding:
    """A finding about some processes and hosts of the job (every id but the three above)."""
    return ClusterFinding(finding_id, severity, summary, fix, processes, hosts, evidence, concerns=concerns)


def known_issue(
    entry: str,
    severity: Severity,
    summary: str,
    fix: str,
    processes: tuple[int, ...],
    hosts: tuple[str, ...],
    evidence: tuple[str, ...],
) -> ClusterFinding:
    """A public bug of jobs spanning hosts that these processes' versions have (_policy/known_issues.json)."""
    return ClusterFinding("cluster-known-issue", severity, summary, fix, processes, hosts, evidence, entry)


def internal_error(error: BaseException, host: str) -> ClusterFinding:
    return ClusterFinding(
        "cluster-internal-error",
        "error",
        f"the cluster preflight failed unexpectedly: {type(error).__name__}: {error}",
        f"report this to the {PLUGIN_DISTRIBUTION} maintainers with the command line and this message",
        hosts=(host,),
    )


def finding_lines(findings: Iterable[ClusterFinding]) -> list[str]:
    """The findings as the preflight and the job check print them: severity, id, summary, fix, whom, evidence."""
    from jax_rocm7_plugin._job.phrases import hosts_phrase, ranges

    lines: list[str] = []
    for finding in findings:
        lines.append(f"  [{finding.severity}] {finding.id}: {finding.summary}")
        lines.append(f"      fix: {finding.fix}")
        concerns = []
        if finding.processes:
            concerns.append(f"processes {ranges(finding.processes)}")
        if finding.hosts:
            concerns.append(f"hosts {hosts_phrase(finding.hosts)}")
        if concerns:
            lines.append(f"      concerns: {'; '.join(concerns)}")
        lines.extend(f"      evidence: {e}" for e in finding.evidence)
    return lines
