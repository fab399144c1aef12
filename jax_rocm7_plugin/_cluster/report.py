"""Process 0's report: a verdict, then each finding with the processes and hosts it concerns. JSON at the edge."""

from __future__ import annotations

import json
from typing import Any

from jax_rocm7_plugin._cluster.collectives import Figure, table_lines
from jax_rocm7_plugin._job.catalog import ClusterFinding, finding_lines
from jax_rocm7_plugin._record import NamedTuple

EXIT_CONSISTENT, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


class ClusterReport(NamedTuple):
    processes: int | None  # expected (None: never learned)
    reported: tuple[int, ...]
    missing: tuple[int, ...]
    hosts: tuple[str, ...]
    findings: tuple[ClusterFinding, ...]
    coordinator: str | None = None
    method: str | None = None  # how the processes found each other: slurm, ompi, ..., arguments
    elapsed_s: float | None = None
    joined: int | None = None  # where joining failed: how many the coordination service saw join (its count)
    deep: bool = False  # --deep ran: the collectives below and each process's local work
    collectives: tuple[Figure, ...] = ()
    local_work: dict[int, float] = {}  # noqa: RUF012 - read only; GFLOP/s by process

    @property
    def exit_code(self) -> int:
        if any(f.id == "cluster-usage-invalid" for f in self.findings):
            return EXIT_USAGE
        return EXIT_PROBLEMS if any(f.is_problem for f in self.findings) else EXIT_CONSISTENT

    @property
    def verdict(self) -> str:
        return {EXIT_CONSISTENT: "consistent", EXIT_PROBLEMS: "problems", EXIT_USAGE: "usage-error"}[self.exit_code]

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "processes": self.processes,
            "reported": list(self.reported),
            "missing": list(self.missing),
            "hosts": list(self.hosts),
            "coordinator": self.coordinator,
            "method": self.method,
            "elapsed_s": self.elapsed_s,
            "joined": self.joined,
            "findings": [f.to_json() for f in self.findings],
            **(
                {
                    "collectives": [c.to_json() for c in self.collectives],
                    "local_work_gflops": {str(p): round(r, 3) for p, r in sorted(self.local_work.items())},
                }
                if self.deep
                else {}
            ),
        }


def render_json(report: ClusterReport) -> str:
    return json.dumps(report.to_json(), indent=2)


def render_text(report: ClusterReport) -> str:
    expected = report.processes if report.processes is not None else "?"
    where = f" on {len(report.hosts)} host(s)" if report.hosts else ""
    how = f" via {report.method}" if report.method else ""
    # Where joining failed nothing was reported, and the one count that means something is the service's: saying
    # "0 of 4 reported" above "3 of 4 joined" would read as two different counts of who joined.
    if report.joined is not None and not report.reported:
        count = f"{report.joined} of {expected} processes joined{where}{how}"
    else:
        count = f"{len(report.reported)} of {expected} processes{where} reported{how}"
    if report.exit_code == EXIT_CONSISTENT:
        head = f"Cluster: consistent: {count}"
    else:
        problems = sum(1 for f in report.findings if f.is_problem)
        head = f"Cluster: {problems} problem(s): {count}"
    lines = [head, *finding_lines(report.findings)]
    if report.deep:
        lines.append(f"Collectives ({len(report.collectives)} measured; bus bandwidth as nccl-tests defines it):")
        lines.extend(table_lines(report.collectives) or ["  none completed"])
    return "\n".join(lines)
