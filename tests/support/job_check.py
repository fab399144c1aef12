"""A multi-process job whose processes start the ROCm backend through our loader, each on its own machine
(test fixture, never shipped): tests/support/job_program.py in every process, jax.distributed on localhost."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.support.cluster import Outcome, free_port, gpus_with_ids, host_sysroot, run_together
from tests.support.environment import REPO
from tests.support.node_health import Node
from tests.support.snippets import clean_env

PROGRAM = REPO / "tests" / "support" / "job_program.py"
LIMIT = 120.0  # seconds for a whole job; a healthy one takes a few
CHECK_LINE = "ROCm backend"


class JobRun:
    """The job's outcomes: each process's exit status, its JOB line, and its lines from our logger."""

    def __init__(self, outcomes: list[Outcome]) -> None:
        self.outcomes = outcomes
        self.results: list[dict[str, Any]] = []
        for outcome in outcomes:
            lines = [line for line in outcome.stdout.splitlines() if line.startswith("JOB ")]
            assert lines, f"no JOB line (exit {outcome.returncode}): {outcome.stderr[-2500:]}"
            self.results.append(json.loads(lines[-1][4:]))

    @property
    def codes(self) -> list[int | None]:
        return [o.returncode for o in self.outcomes]

    def lines(self, process: int) -> list[str]:
        """Our logger's lines in a process's stderr (the warning prefix is the logger's own)."""
        return [line for line in self.outcomes[process].stderr.splitlines() if CHECK_LINE in line]


def run_job(
    tmp_path: Path,
    standin: Path,
    count: int,
    *,
    python: Path = Path(sys.executable),
    pythonpath: str | None = str(REPO),
    gfx: dict[int, int] | None = None,
    no_kfd: tuple[int, ...] = (),
    library: dict[int, Path] | None = None,
    each: dict[str, str] | None = None,
    per_process: dict[int, dict[str, str]] | None = None,
    hosts: dict[int, str] | None = None,
    nodes: dict[int, Node] | None = None,
    coordinator: str = "127.0.0.1",
    one_machine: bool = False,
) -> JobRun:
    """`count` processes, each on a machine of its own (`count` gfx942 GPUs), all named node-0 unless `hosts` says;
    `nodes`: a process's GPUs as a node's boards, with their health files; `one_machine`: all on process 0's.
    A machine made by an earlier job in `tmp_path` is kept as it is (a later job on the same machines)."""
    port = free_port()
    commands = []
    for process in range(count):
        root = tmp_path / f"p{0 if one_machine else process}"
        if not root.exists():
            host_sysroot(
                root,
                (hosts or {}).get(process, "node-0"),
                gpus_with_ids(count, (gfx or {}).get(process, 90402)),
                kfd=process not in no_kfd,
                node=(nodes or {}).get(process),
            )
        env = clean_env(
            JAX_ROCM_SYSROOT=str(root),
            JAX_ROCM_PJRT_LIBRARY=str((library or {}).get(process, standin)),
            XDG_CACHE_HOME=str(tmp_path / "cache"),
            **(each or {}),
            **(per_process or {}).get(process, {}),
        )
        if pythonpath is not None:
            env["PYTHONPATH"] = pythonpath
        else:
            env.pop("PYTHONPATH", None)
        argv = [str(python), str(PROGRAM), f"{coordinator}:{port}", str(count), str(process)]
        commands.append((argv, env))
    outcomes = run_together(commands, tmp_path, LIMIT)  # cwd: never the checkout (it would shadow the wheel)
    assert all(o.returncode is not None for o in outcomes), "a process of the job hung past the limit"
    return JobRun(outcomes)


def refused_everywhere(job: JobRun, finding: str, odd: list[int], own_reason: tuple[int, ...] = ()) -> None:
    """Every process fell back (exit 3) on one verdict that names the finding and the odd processes (jax's
    error in a process of `own_reason` is that process's own reason, which it gave at import)."""
    count = len(job.outcomes)
    assert job.codes == [3] * count, [o.stderr[-1500:] for o in job.outcomes]
    verdict = json.loads(job.results[0]["keys"]["jax_rocm7/job-check/0/verdict"])
    assert verdict["kind"] == "refuse" and verdict["processes"] == odd and f"[{finding}]" in verdict["line"]
    for process in range(count):
        if process not in own_reason:
            assert verdict["line"] in job.results[process]["error"]  # jax's error is the verdict's line
        assert any(verdict["line"] in line for line in job.lines(process)), job.lines(process)
    table = [line for line in job.outcomes[0].stderr.splitlines() if f"[error] {finding}:" in line]
    assert len(table) == 1  # process 0 printed the table
    assert all(f"[error] {finding}:" not in o.stderr for o in job.outcomes[1:])
