"""A hung job names who holds it up (_job/hang.py): three real processes join jax.distributed on localhost and
run a jitted loop with a cross-process all-gather on jax's CPU backend over gloo (tests/support/hang_job.py,
armed by JAX_ROCM_HANG_PLATFORMS=cpu, JAX_ROCM_HANG_TIMEOUT=3); one of them leaves the loop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jax_rocm7_plugin._job import hang
from tests.support.browser import open_page
from tests.support.cluster import free_port
from tests.support.environment import REPO
from tests.support.node_health import HEALTHY_NODES, make_node
from tests.support.sysroots import make_sysroot

MI300X_NODE = HEALTHY_NODES["8x MI300X (XGMI, SPX/NPS1)"]

JOB = REPO / "tests" / "support" / "hang_job.py"
HANG_TIMEOUT = 3
# From the moment the loop stops until the report: the timeout, a sample, the ask's grace and the collection.
BOUND = HANG_TIMEOUT + 12


def run_job(
    tmp_path: Path,
    seconds: float,
    *,
    steps: int = 10**6,
    stop: int | None = None,
    stop_after: float = 1.0,
    until: str | None = None,
    roots: list[Path] | None = None,
    meanwhile: Callable[[list[Path]], None] | None = None,
    **variables: str,
) -> tuple[list[str], list[int | None]]:
    """Start the three processes, wait up to `seconds` or until an output holds `until` (SIGSTOP process `stop`
    `stop_after` seconds into the loop), end them all; each process's output, and its exit code before it was ended.
    `roots`: each process's own machine (else one without GPUs for all); `meanwhile`: called once every process
    is in the loop (given the outputs)."""
    root = make_sysroot(tmp_path / "machine", [], topology=False, amdgpu_module=False, kfd=False)
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    environ = {
        **keep,
        "PYTHONPATH": str(REPO),
        "JAX_ROCM_SYSROOT": str(root),
        "JAX_PLATFORMS": "cpu",
        "JAX_ROCM_HANG_PLATFORMS": "cpu",
        "JAX_ROCM_HANG_TIMEOUT": str(HANG_TIMEOUT),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        **variables,
    }
    port = free_port()
    outs = [tmp_path / f"process-{i}.txt" for i in range(3)]
    started = [
        subprocess.Popen(
            [sys.executable, str(JOB), str(i), "3", str(port), str(steps)],
            env={**environ, "JAX_ROCM_SYSROOT": str(roots[i])} if roots else environ,
            stdout=out.open("w"),
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
        for i, out in enumerate(outs)
    ]
    deadline = time.monotonic() + seconds
    try:
        if stop is not None:
            while time.monotonic() < deadline and "devices" not in outs[stop].read_text():
                time.sleep(0.2)
            time.sleep(stop_after)
            started[stop].send_signal(signal.SIGSTOP)
        if meanwhile is not None:
            while time.monotonic() < deadline and not all("devices" in out.read_text() for out in outs):
                time.sleep(0.2)
            meanwhile(outs)
        while time.monotonic() < deadline and any(p.poll() is None for p in started):
            if until is not None and any(until in out.read_text() for out in outs):
                time.sleep(0.5)  # the rest of the report's line
                break
            time.sleep(0.2)
    finally:
        codes = [p.poll() for p in started]
        for process in started:
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
            process.wait(timeout=30)
    return [out.read_text() for out in outs], codes


def said(outputs: list[str], marker: str) -> list[str]:
    return [line for text in outputs for line in text.splitlines() if marker in line]


# Several moments: before the first collective, early in the loop, well into it.
@pytest.mark.parametrize(("fault", "step"), [("sleep", "0"), ("spin", "3"), ("sleep", "40")])
def test_the_process_that_left_the_loop_is_named_with_its_place(
    tmp_path: Path, fault: str, step: str, browser: Any
) -> None:
    secret = "hunter2-planted-7f3a"
    outputs, _ = run_job(
        tmp_path,
        20 + BOUND,
        until="ROCm job hangs:",
        FAULT=fault,
        FAULT_STEP=step,
        FAULT_PROCESS="1",
        PLANTED_SECRET=secret,
    )
    (line,) = said(outputs, "ROCm job hangs:")
    assert "2 of 3 processes wait in jax (hang_job.py" in line
    assert "process 1 (" in line and "leave_the_loop: it holds the job up" in line
    stacks = Path(line.rsplit("every process's stack: ", 1)[1].rstrip(")").split("; the timeline: ")[0])
    text = stacks.read_text()
    assert "process 1" in text and "leave_the_loop" in text and "locals" not in text
    # What left the processes (the stacks file, every output line) holds names only, never the planted values.
    assert secret not in text and all(secret not in output for output in outputs)
    # Beside it, the page: a timeline per process, process 1 marked, in a real browser.
    page = stacks.with_suffix(".html")
    assert f"the timeline: {page}" in line and secret not in page.read_text()
    seen = open_page(browser, page, f"hang-{fault}-{step}")
    assert seen.console_errors == [] and seen.requests == [] and seen.overflow == 0
    assert seen.verdict == f"WARNING: {line.split('ROCm job hangs: ', 1)[1].split(' (every process', 1)[0]}"
    assert [m["process"] for m in seen.marked] == ["1"]


@pytest.mark.parametrize("stop_after", [0.2, 2.5])
def test_a_frozen_process_is_named_as_not_answering(tmp_path: Path, stop_after: float) -> None:
    outputs, _ = run_job(tmp_path, 20 + BOUND, stop=2, stop_after=stop_after, until="ROCm job hangs:")
    (line,) = said(outputs, "ROCm job hangs:")
    assert "process 2 (" in line and "does not answer: frozen, dead" in line
    assert "2 of 3 processes wait in jax" in line


def test_a_main_thread_that_holds_the_gil_is_named_by_the_others(tmp_path: Path) -> None:
    """Process 1's main thread sits in a C call that keeps the GIL (ctypes.PyDLL): its own watcher cannot run,
    the others name it."""
    outputs, _ = run_job(tmp_path, 20 + BOUND, until="ROCm job hangs:", FAULT="gil", FAULT_PROCESS="1")
    (line,) = said(outputs, "ROCm job hangs:")
    assert "2 of 3 processes wait in jax" in line
    assert "process 1 (host unknown) does not answer: frozen, dead, or its main thread holds the GIL" in line


def test_all_in_one_place_blames_no_one_and_never_exits(tmp_path: Path) -> None:
    """Every process in the same place (a long step, a checkpoint): said at info level, nobody leaves."""
    outputs, codes = run_job(
        tmp_path, 10 + BOUND, FAULT="sleep", FAULT_PROCESS="-2", JAX_ROCM_HANG_ACTION="exit", until="all 3 processes"
    )
    (line,) = said(outputs, "all 3 processes have been")  # the watcher saw it (with it off, no line comes)
    assert " INFO " in line and "no process holding the others up" in line
    assert said(outputs, "ROCm job hangs:") == [] and codes == [None, None, None]


def test_all_in_one_place_names_the_gpu_whose_counters_moved(tmp_path: Path) -> None:
    """Each process on a host of its own (its sysroot: 8 MI300X in the documented sysfs formats); while every
    process sleeps in one place, one GPU of host-1 counts an uncorrectable error: the report names it."""
    roots = []
    for i in range(3):
        root = make_node(tmp_path / f"host-{i}", MI300X_NODE)
        (root / "proc" / "sys" / "kernel").mkdir(parents=True, exist_ok=True)
        (root / "proc" / "sys" / "kernel" / "hostname").write_text(f"host-{i}\n")
        roots.append(root)
    counters = roots[1] / "sys" / "bus" / "pci" / "devices" / MI300X_NODE.boards[3].pci / "ras" / "aca_umc"

    def break_a_gpu(outs: list[Path]) -> None:
        time.sleep(2.0)  # the watchers read the counters at their first sample; the hang is noticed 6 s into the sleep
        counters.write_text("ue: 1\nce: 0\nde: 0\n")

    # A 6 s timeout: the GPU breaks 2 s into the sleep, well after the watchers' first read and well before
    # the hang is noticed, even under load.
    outputs, _ = run_job(
        tmp_path, 13 + BOUND, FAULT="sleep", FAULT_PROCESS="-2", until="all 3 processes", roots=roots,
        meanwhile=break_a_gpu, JAX_ROCM_HANG_TIMEOUT="6",
    )  # fmt: skip
    (line,) = said(outputs, "all 3 processes have been")
    assert " WARNING " in line, line
    assert f"on host-1, GPU 3 (gfx942 at {MI300X_NODE.boards[3].pci}) had 1 new uncorrectable error(s)" in line
    assert "the job likely waits on that GPU" in line and "host-0," not in line and "host-2," not in line


def test_exit_makes_every_process_leave_with_the_stated_code(tmp_path: Path) -> None:
    outputs, codes = run_job(tmp_path, 20 + BOUND, FAULT="sleep", FAULT_PROCESS="1", JAX_ROCM_HANG_ACTION="exit")
    assert len(said(outputs, "ROCm job hangs:")) == 1
    assert codes == [hang.HANG_EXIT_CODE] * 3, codes


def test_a_healthy_loop_reports_nothing(tmp_path: Path) -> None:
    """No hang is reported in a loop that runs to its end. On a loaded machine one step can stand still for the
    3 s timeout in every process at once: that is said at info level and blames no one (seen with four workers on
    two cores), which is what the product promises for a job that is all in one place."""
    outputs, _ = run_job(tmp_path, 60, steps=200)
    assert all("done" in text for text in outputs), outputs
    lines = said(outputs, "ROCm job")
    assert all(" INFO " in line and "no process holding the others up" in line for line in lines), lines


def test_a_process_that_exits_while_a_watcher_call_is_in_flight_exits_cleanly(tmp_path: Path) -> None:
    """A daemon thread that comes back from a jaxlib call while the interpreter finishes aborts the process
    ("FATAL: exception not rethrown", SIGABRT: seen with a bare thread and jax 0.10.2). Here every call of each
    watcher first waits 0.5 s in a real jaxlib call, so that at exit one is in flight in nearly every process: the
    watcher's exit handler lets none start and waits for it, and every process exits with 0."""
    outputs, codes = run_job(tmp_path, 90, steps=40, SLOW_SERVICE="0.5")
    assert all("done" in text for text in outputs), outputs
    assert codes == [0, 0, 0], (codes, [text[-600:] for text in outputs])
