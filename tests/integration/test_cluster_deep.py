"""`cluster --deep --platform cpu` with the real engine: jax.distributed on this machine's address, jax's CPU
backend running the collectives across processes over gloo (jax 0.10.2, this checkout). Faults are real: a
process's courier stopped with SIGSTOP (a hang), killed with SIGKILL, or slowed by a SIGSTOP/SIGCONT duty cycle;
a host's network link throttled by the kernel (network namespaces, tc-tbf).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import netlab, trace_events
from tests.support.browser import open_page
from tests.support.deep_job import STEP_TIMEOUT, DeepJob, by_id, report_of
from tests.support.environment import REPO, require
from tests.support.netlab import NetLab
from tests.support.node_health import GEN5, HEALTHY_NODES, Node
from tests.support.snippets import clean_env


# Two processes (one host) and six (three hosts, pairs between them) in the suite; four with --sweeps.
@pytest.mark.parametrize("count", [2, pytest.param(4, marks=pytest.mark.sweep), 6])
def test_a_healthy_job_measures_every_collective(
    tmp_path: Path, standin_library: Path, count: int, browser: Any
) -> None:
    job = DeepJob(tmp_path, standin_library, count)
    page, trace = tmp_path / "job.html", tmp_path / "job.trace.json"
    results = job.run(first=("--html", str(page), "--trace", str(trace)))
    report = report_of(results)
    _check_pictures(report, page, trace, count, browser)
    # Up to six processes on this machine's two cores, beside the suite's other worker: the scheduler may
    # starve one during its local work or a host's step, which is then named as slow (a warning, exit 1
    # everywhere). Nothing else.
    others = [f for f in report["findings"] if f["id"] not in ("cluster-process-slow", "cluster-link-slow")]
    assert others == [], others
    expected = 1 if report["findings"] else 0
    assert [r[0] for r in results] == [expected] * count, ["".join(s[-20:]) for s in job.stderr]
    collectives = report["collectives"]
    job_wide = [c for c in collectives if c["group"] == "job"]
    assert [(c["op"], c["bytes"]) for c in job_wide] == [
        (op, size) for size in (8, 4096, 1024 * 1024) for op in ("all-reduce", "all-gather")
    ]
    # Two processes per host: within each host, then (3 hosts and more) each pair of the ring of hosts.
    hosts = [f"node-{h}" for h in range(count // 2)]
    pairs = [f"pair:{a},{b}" for a, b in zip(hosts, hosts[1:] + hosts[:1], strict=True)] if count > 4 else []
    assert [c["group"] for c in collectives[len(job_wide) :]] == [*(f"host:{h}" for h in hosts), *pairs]
    for entry in collectives:
        expected_ranks = count if entry["group"] == "job" else 2 if entry["group"].startswith("host:") else 4
        assert entry["ranks"] == expected_ranks and entry["seconds"] > 0
        assert entry["algbw_gbps"] == pytest.approx(entry["bytes"] / entry["seconds"] / 1e9, rel=1e-3)
        ranks = entry["ranks"]
        factor = 2 * (ranks - 1) / ranks if entry["op"] == "all-reduce" else (ranks - 1) / ranks
        assert entry["busbw_gbps"] == pytest.approx(entry["algbw_gbps"] * factor, rel=1e-3, abs=1e-6)
        assert ranks > 1  # one rank's busbw is null (tests/unit/test_collectives.py)
    assert sorted(report["local_work_gflops"]) == [str(p) for p in range(count)]


def _check_pictures(report: dict[str, Any], page: Path, trace: Path, count: int, browser: Any) -> None:
    """Process 0's page in a real browser (the verdict, the job's collectives drawn) and its trace: every step of
    every process, nested in the process's run, with the job's bandwidth for the collectives."""
    seen = open_page(browser, page, f"cluster-deep-real-{count}")
    assert seen.console_errors == [] and seen.requests == [] and seen.overflow == 0
    assert seen.verdict.split(": ", 1)[1].startswith(f"{report['verdict']}: {count} of {count} processes")
    data = json.loads(trace.read_text())
    assert trace_events.problems(data) == []
    per_process = trace_events.slices(data)
    assert sorted(per_process) == list(range(count))
    for names in per_process.values():
        assert names[:4] == ["cluster --deep", "backend", "first-jit", "local-work"]
        assert [n for n in names if n.startswith("all-")] == [
            f"{op}/{size}" for size in (8, 4096, 1024 * 1024) for op in ("all-reduce", "all-gather")
        ]
    collective = next(e for e in data["traceEvents"] if e["name"] == "all-reduce/1048576" and e["pid"] == 0)
    figure = next(c for c in report["collectives"] if c["group"] == "job" and c["bytes"] == 1024 * 1024
                  and c["op"] == "all-reduce")  # fmt: skip
    assert collective["args"]["busbw_gbps"] == figure["busbw_gbps"]


def test_a_process_stopped_mid_run_is_named_by_the_deadline(tmp_path: Path, standin_library: Path) -> None:
    job = DeepJob(tmp_path, standin_library, 3)
    results = job.run(fault=(1, "all-gather/8", "stop"), sizes="8")
    assert job.faulted_at is not None
    code, _, seconds = results[0]
    assert code == 1
    hung = by_id(report_of(results))["cluster-collective-hung"]
    # Process 1 alone: under load, process 0 once read process 2's report with the last millisecond of its wait
    # and named it too (_job/store.py says why it no longer can).
    assert hung["processes"] == [1] and hung["hosts"] == ["node-0"] and "never reported" in hung["summary"], hung
    # The README's bound for a courier hung but alive in --deep (jax_rocm7_plugin/_cluster/README.md, "When a
    # process stops, dies or is interrupted"): S + G + 5 s after the stop, G = 5 s + 5 S.
    bound = STEP_TIMEOUT + (5 + 5 * STEP_TIMEOUT) + 5
    assert job.started + seconds - job.faulted_at <= bound
    # The stopped courier's own parent gives the step its deadline and the courier's watchdog its time to say
    # so, then ends it and exits 1.
    stopped_code, _, stopped_seconds = results[1]
    assert stopped_code == 1
    assert job.started + stopped_seconds - job.faulted_at <= bound
    assert all("Traceback" not in "".join(s) for s in job.stderr)


def test_a_process_killed_mid_step_is_named(tmp_path: Path, standin_library: Path) -> None:
    job = DeepJob(tmp_path, standin_library, 2)
    results = job.run(fault=(1, "all-gather/4096", "kill"))
    assert results[0][0] == 1 and results[1][0] == 1
    report = report_of(results)
    assert "cluster-collective-hung" in by_id(report), (report["findings"], report["collectives"])
    hung = by_id(report)["cluster-collective-hung"]
    assert hung["processes"] == [1]


def test_a_slowed_process_is_named_as_slow(tmp_path: Path, standin_library: Path) -> None:
    # Slowed from the step before the local work (which is short) to its first collective; at a twentieth of its
    # speed a compile takes seconds, hence the longer step deadline. A host each: on the CPU platform processes
    # that share a host share its cores, and only hosts are compared.
    job = DeepJob(tmp_path, standin_library, 2, per_host=1, step_timeout=30)
    results = job.run(fault=(1, "first-jit", "slow"))
    report = report_of(results)
    found = by_id(report)
    assert "cluster-process-slow" in found, report["local_work_gflops"]
    slow = found["cluster-process-slow"]
    assert slow["processes"] == [1] and slow["hosts"] == ["node-1"], report["local_work_gflops"]
    assert results[0][0] == 1


@pytest.fixture
def four_hosts() -> Iterator[NetLab]:
    reason = netlab.available()
    require(reason is None, f"hosts with links of their own ({reason})")
    lab = NetLab(4)
    try:
        yield lab
    finally:
        lab.close()


def test_a_throttled_link_is_located_at_its_host(tmp_path: Path, standin_library: Path, four_hosts: NetLab) -> None:
    """Four hosts of one process each, every host its own network namespace linked through a bridge; node-1's
    link throttled to 100 Mbit/s both ways (tc-tbf), the others at the bridge's speed. The pairs crossing it are
    slow, and node-1 is the host in both. In the second round process 0's pair (node-3, node-0) ends seconds
    before the slow one: process 0 waits for it rather than calling it silent."""
    four_hosts.throttle(1, "100mbit")
    # Each host two MI300X with their health files; node-1's GPU 0 has a PCIe link trained at x4: the slow link's
    # finding says that host's health may explain it.
    pair = Node(HEALTHY_NODES["8x MI300X (XGMI, SPX/NPS1)"].boards[:2])
    nodes = {h: pair for h in range(4)} | {1: pair.with_board(0, link=(GEN5, 4))}
    job = DeepJob(tmp_path, standin_library, 4, per_host=1, lab=four_hosts, step_timeout=30, nodes=nodes)
    results = job.run(sizes="8,16M")
    report = report_of(results)
    pairs = {c["group"]: c for c in report["collectives"] if c["group"].startswith("pair:")}
    assert sorted(pairs) == ["pair:node-0,node-1", "pair:node-1,node-2", "pair:node-2,node-3", "pair:node-3,node-0"]
    # 16 MiB all-reduced by two ranks moves 16 MiB each way: at least 1.34 s at 100 Mbit/s.
    assert all(pairs[g]["seconds"] >= 1.3 for g in ("pair:node-0,node-1", "pair:node-1,node-2")), pairs
    slow = by_id(report)["cluster-link-slow"]
    assert slow["hosts"] == ["node-1"] and slow["processes"] == [1], slow
    assert "node-1 is in every slow pair" in slow["summary"]
    assert "the health of the host named may explain it: node-1: GPU 0 (gfx942 at" in slow["summary"]
    assert "x4" in slow["summary"] and "[pcie-link-degraded]" in slow["summary"]
    others = [f["id"] for f in report["findings"] if f["id"] not in ("cluster-link-slow", "cluster-process-slow")]
    assert others == ["cluster-gpu-degraded"] and [r[0] for r in results] == [1] * 4, report["findings"]
    assert by_id(report)["cluster-gpu-degraded"]["hosts"] == ["node-1"]


def test_bad_sizes_are_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jax_rocm7_plugin", "cluster", "--deep", "--sizes", "8,lots"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(PYTHONPATH=str(REPO)),
        timeout=60,
    )
    assert done.returncode == 2 and "'lots' is not a size" in done.stderr


def test_a_cpu_run_on_nodes_without_a_gpu_can_pass(tmp_path: Path, standin_library: Path) -> None:
    """`--deep --platform cpu` where no node has an AMD GPU: the collectives run and pass; that the ROCm backend
    would not come up is said (info), and does not decide the exit code."""
    job = DeepJob(tmp_path, standin_library, 2, gpus=0)
    results = job.run(sizes="8")
    report = report_of(results)
    assert [code for code, _, _ in results] == [0, 0], report["findings"]
    (unavailable,) = [f for f in report["findings"] if f["id"] == "cluster-backend-unavailable"]
    assert unavailable["severity"] == "info" and "not needed by this --platform cpu run" in unavailable["summary"]
    assert [(c["op"], c["bytes"]) for c in report["collectives"]][:2] == [("all-reduce", 8), ("all-gather", 8)]
