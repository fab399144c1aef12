"""The pages, opened from file:// in a real Chromium (tests/support/browser.py): no console error and no request,
the verdict's text, the marked element is the odd host, GPU, link or process, nothing overflows at 1280 px. Each
result is produced by the real code (the comparison, the deep steps' reading, the doctor on a synthetic node, the
hang watcher's grouping); only the machines and measurements are made up, and labelled so."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from jax_rocm7_plugin._cluster.collectives import read_steps
from jax_rocm7_plugin._cluster.deep import group_steps, plan_steps
from jax_rocm7_plugin._cluster.report import ClusterReport
from jax_rocm7_plugin._job.compare import compare
from jax_rocm7_plugin._job.hang_report import Answer, held_up_by
from jax_rocm7_plugin._job.hang_report import report as hang_report
from jax_rocm7_plugin._pages import cluster, hang, trace
from tests.support import trace_events
from tests.support.browser import Seen, open_page, print_a4
from tests.support.cluster import free_port
from tests.support.environment import REPO
from tests.support.node_health import GEN5, HEALTHY_NODES, make_node
from tests.support.records import lab
from tests.support.snippets import clean_env
from tests.support.sysroots import make_sysroot

ODD_HOST, ODD_GPU = 17, 3


def _clean(seen: Seen) -> None:
    assert seen.console_errors == [] and seen.requests == [] and seen.overflow == 0, seen


def _cluster_page(tmp_path: Path, hosts: int) -> Path:
    """A job of `hosts` x 8 processes (records as the preflight builds them; synthetic hosts) where one GPU's PCIe
    link trained narrower than on every other host: the real comparison names it."""
    records = lab(hosts, {(ODD_HOST, ODD_GPU): {"link": "16 GT/s x8"}})
    findings = tuple(compare(records))
    hostnames = tuple(sorted({r.host for r in records.values()}))
    report = ClusterReport(len(records), tuple(sorted(records)), (), hostnames, findings, "gpu-0:6000", "slurm", 2.5)
    page = tmp_path / f"cluster-{hosts}.html"
    page.write_text(cluster.render(report.to_json(), records))
    return page


def test_the_cluster_page_marks_the_odd_gpu_of_64_hosts_on_one_screen(tmp_path: Path, browser: Any) -> None:
    page = _cluster_page(tmp_path, 64)
    seen = open_page(browser, page, "cluster-64-hosts", width=1440, height=900)
    _clean(seen)
    assert seen.verdict.startswith("WARNING: problems: 512 of 512 processes on 64 host(s)")
    cells = [m for m in seen.marked if "gpu" in m and "severity" in m]
    assert cells == [{"host": f"gpu-{ODD_HOST}", "gpu": str(ODD_GPU), "severity": "warning", "marked": "true"}]
    assert [m["host"] for m in seen.marked if "hosts" in m] == [f"gpu-{ODD_HOST}"]
    # Found without scrolling: the odd cell lies within the first 1440 x 900 screen.
    box = seen.boxes[f"gpu-{ODD_HOST}/{ODD_GPU}"]
    assert box["x"] >= 0 and box["x"] + box["width"] <= 1440 and box["y"] >= 0 and box["y"] + box["height"] <= 900
    _clean(open_page(browser, page, "cluster-64-hosts-1280", width=1280, height=900))


def test_the_cluster_page_reads_without_javascript_and_prints_on_a4(tmp_path: Path, browser: Any) -> None:
    page = _cluster_page(tmp_path, 64)
    seen = open_page(browser, page, "cluster-64-hosts-no-script", script=False)
    _clean(seen)
    assert seen.verdict.startswith("WARNING: problems") and f"gpu-{ODD_HOST}/{ODD_GPU}" in seen.boxes
    pdf = print_a4(browser, page)
    pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf))
    assert pdf.startswith(b"%PDF") and 1 <= pages <= 3, pages
    # A4 portrait: 595 x 842 points.
    assert re.search(rb"/MediaBox\s*\[\s*0 0 59[45](\.\d+)? 84[12]", pdf), pdf[:2000]


def test_1024_hosts_fold_into_a_small_page_that_still_names_the_odd_one(tmp_path: Path, browser: Any) -> None:
    page = _cluster_page(tmp_path, 1024)
    assert page.stat().st_size < 100_000, page.stat().st_size  # the alike hosts share one tile and one row
    seen = open_page(browser, page, "cluster-1024-hosts", width=1440, height=900)
    _clean(seen)
    assert "8192 of 8192 processes on 1024 host(s)" in seen.verdict
    assert [m["host"] for m in seen.marked if "hosts" in m] == [f"gpu-{ODD_HOST}"]
    folded = [m for m in seen.tiles if m["hosts"] != "1"]
    assert [int(m["hosts"]) for m in folded] == [1023]


def _deep_report(slow_pair: str, slow_process: int) -> tuple[dict[str, Any], list[dict[str, Any]], dict[int, str]]:
    """The deep steps of 4 hosts x 2 processes as the courier gathers them (made-up timings: one pair of hosts ten
    times slower, one process's local work at a third), read by the real reading."""
    count, sizes = 8, [8, 4096, 1 << 20]
    host_of = {p: f"node-{p // 2}" for p in range(count)}
    steps = plan_steps(sizes)
    steps = [*steps, *group_steps(host_of, sizes)]
    clock = 1_700_000_000.0
    for step in steps:
        outcomes = {}
        for p in range(count):
            seconds = 0.002 * (1 + int(step.get("bytes", 0)) / 65536)
            group = next((g for g, m in step.get("groups", {}).items() if p in m), None)
            if group == f"pair:{slow_pair}":
                seconds *= 10
            outcome: dict[str, Any] = {"ok": True, "seconds": seconds, "began": clock, "ended": clock + seconds * 3}
            if group is not None:
                outcome["group"] = group
            if step["name"] == "local-work":
                outcome["gflops"] = 40.0 if p != slow_process else 13.0
            if "op" in step:
                outcome["ranks"] = len(step["groups"][group]) if group else count
            outcomes[str(p)] = outcome
        step["outcomes"] = outcomes
        clock += 0.5
    result = read_steps(steps, count, host_of, 60.0)
    report = ClusterReport(count, tuple(range(count)), (), tuple(sorted(set(host_of.values()))), result.findings,
                           deep=True, collectives=result.figures, local_work=result.rates)  # fmt: skip
    return report.to_json(), steps, host_of


def test_the_deep_page_marks_the_slow_link_and_the_slow_process(tmp_path: Path, browser: Any) -> None:
    report, _, _ = _deep_report("node-1,node-2", 5)
    assert {f["id"] for f in report["findings"]} == {"cluster-link-slow", "cluster-process-slow"}
    # What is marked comes from what the finding concerns, not from its words: reworded evidence changes nothing.
    report = {**report, "findings": [{**f, "evidence": ["reworded"]} for f in report["findings"]]}
    page = tmp_path / "deep.html"
    page.write_text(cluster.render(report, {}))
    seen = open_page(browser, page, "cluster-deep", width=1280, height=900)
    _clean(seen)
    assert seen.verdict.startswith("WARNING: problems")
    assert {m.get("group") for m in seen.marked if "group" in m} == {"pair:node-1,node-2"}
    assert [m["process"] for m in seen.marked if "process" in m] == ["5"]


def test_the_trace_holds_every_step_of_every_process_nested() -> None:
    report, steps, host_of = _deep_report("node-1,node-2", 5)
    data = json.loads(trace.render(steps, report["collectives"], host_of))
    assert trace_events.problems(data) == []
    per_process = trace_events.slices(data)
    assert sorted(per_process) == list(range(8))
    for process, names in per_process.items():
        ran = [s["name"] for s in steps if str(process) in s["outcomes"]]
        assert names == ["cluster --deep", *ran]
    pair = next(e for e in data["traceEvents"] if e["ph"] == "X" and e["args"].get("group") == "pair:node-1,node-2")
    assert pair["args"]["bytes"] == 1 << 20 and pair["args"]["busbw_gbps"] > 0


def test_the_doctor_page_marks_the_degraded_gpu(tmp_path: Path, browser: Any) -> None:
    """The doctor run for real on a synthetic MI300X node whose GPU 5 trained at x8 and left its hive."""
    node = HEALTHY_NODES["8x MI300X (XGMI, SPX/NPS1)"].with_board(5, link=(GEN5, 8), hive=0x77, xgmi=False)
    root = make_node(tmp_path / "root", node)
    page = tmp_path / "doctor.html"
    command = [sys.executable, "-m", "jax_rocm7_plugin", "doctor", "--sysroot", str(root), "--html", str(page)]
    done = subprocess.run(command, env=clean_env(PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and page.is_file(), done.stderr  # written, above all when it fails
    seen = open_page(browser, page, "doctor-degraded-node", width=1280, height=900)
    _clean(seen)
    assert seen.verdict == "ERROR: " + done.stdout.splitlines()[0]
    assert [m["gpu"] for m in seen.marked if "pci" in m] == ["5"]
    # An existing page is kept without --force: a usage error before any work, the file unchanged.
    before = page.read_bytes()
    again = subprocess.run(command, env=clean_env(PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "exists; add --force" in again.stderr and page.read_bytes() == before
    forced = subprocess.run(
        [*command, "--force"], env=clean_env(PYTHONPATH=str(REPO)), capture_output=True, timeout=120
    )
    assert forced.returncode == 1


def test_the_hang_page_marks_the_process_holding_the_job_up(tmp_path: Path, browser: Any) -> None:
    """Answers as three processes give them (made up): two wait in jax's all-gather, one sleeps in its own code."""
    waiting = ("train.py:40 step", True)
    answers = {
        p: Answer(p, f"node-{p}", *(waiting if p != 1 else ("train.py:52 checkpoint", False)), 30.0,
                  ("train.py:40 step",), trail=((62.0, "train.py:12 load", False), (30.0, *(waiting if p != 1 else
                  ("train.py:52 checkpoint", False)))))
        for p in range(3)
    }  # fmt: skip
    level, line = hang_report(answers, 3, {})
    page = tmp_path / "hang.html"
    page.write_text(hang.render(level, line, answers, 3, held_up_by(answers, 3)))
    seen = open_page(browser, page, "hang-timeline", width=1280, height=900)
    _clean(seen)
    assert seen.verdict == f"WARNING: {line}" and "process 1 (node-1)" in line
    assert [m["process"] for m in seen.marked] == ["1"]


def test_a_job_that_never_came_together_still_gets_its_page(tmp_path: Path, browser: Any) -> None:
    """Process 0 of two, alone: joining fails by its deadline, and the page says so (the machine: one without GPUs)."""
    root = make_sysroot(tmp_path / "machine", [], topology=False, amdgpu_module=False, kfd=False)
    page = tmp_path / "alone.html"
    command = [
        sys.executable, "-m", "jax_rocm7_plugin", "cluster", "--coordinator-address", f"127.0.0.1:{free_port()}",
        "--num-processes", "2", "--process-id", "0", "--timeout", "3", "--html", str(page),
    ]  # fmt: skip
    environ = clean_env(PYTHONPATH=str(REPO), JAX_ROCM_SYSROOT=str(root))
    done = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 1 and page.is_file(), done.stderr
    seen = open_page(browser, page, "cluster-alone")
    _clean(seen)
    assert seen.verdict.startswith("ERROR: problems") and "1 of 2 processes joined" in done.stdout
