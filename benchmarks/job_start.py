"""What a process of a multi-process job pays for our pair at backend start, against a bare registration.

    python benchmarks/job_start.py --library PATH [--processes 2 4 8] [--pairs 5] [--modes warm cold] [--python PYTHON]
    python benchmarks/job_start.py --library PATH --by-part [--processes 1 2] [--pairs 15]
    ... --stamped: our side as an installed build is (this checkout's package with the source digest stamped)
    python benchmarks/job_start.py --library PATH --floor 1 2.5 5 [--processes 2 4 8] [--pairs 7]

N real processes on localhost join jax.distributed (explicit address, count and id), each with its share of one
synthetic node of 8 x MI300X (JAX_ROCM_SYSROOT, tests/support/node_health.py: KFD topology, /dev, each GPU's PCI
and health files, whose 80 error counters and modes a job's warm start reads; HIP_VISIBLE_DEVICES=<its id>,
local device 0), meet at a barrier of the coordination service, then time `jax.devices()` with
JAX_PLATFORMS=rocm: jax's plugin discovery, our loader (the warm path or the checks), the job check, and the
client of PATH (the stand-in, registered as 'rocm'). A job's figure is its slowest process's time (the job
waits for it). The other side is "bare": a `jax_plugins` module that registers PATH as 'rocm' and checks nothing.

- warm: the plan and process 0's memory of agreeing records come from an earlier job (not timed) on the same
  machine and cache: every job after the first.
- cold: each job with an empty cache (the first job on a machine: the checks, the load test in a child, and a
  full comparison).

The sides alternate (ours, bare, ours, bare ...). Printed per N: each side's median (min-max) and the median of
the per-pair differences. Also process 0's debug line, which says whether it compared or remembered.

--by-part: where a warm process's added CPU goes. Rounds of four jobs (ours; ours with JAX_ROCM_HANG_TIMEOUT=off;
ours with the job check off too; bare), each process's CPU during jax.devices() (all its threads, and its main
thread alone), medians over rounds and processes. With 1 process the loader takes the lone warm path.

--stamped: a copy of this checkout's package, first on PYTHONPATH, whose version.py carries the source digest
a wheel's build stamps (build/jax_rocm7_build/assemble.py): the plan's key then names the package by it, as in an
installed pair, instead of a stat per file of a source tree.

--floor MS...: a calibration of this machine, not of our code: the bare side against the bare side that also spends
MS ms of CPU (a busy loop) in each process's registration, the same interleaved pairs. It says what a fixed CPU
cost per process becomes in the slowest process's wall time at N processes on this machine's cores: the least any
loader that costs that much can add.

Run it from outside the repository, with nothing else heavy running.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from job_check import KEEP_OUR_LINES, bench_records  # noqa: E402 - beside this script

from tests.support.cluster import free_port, host_sysroot  # noqa: E402
from tests.support.node_health import HEALTHY_NODES  # noqa: E402

NODE = "8x MI300X (XGMI, SPX/NPS1)"  # a whole node: KFD topology, /dev, and each GPU's PCI and health files

PROCESS = (
    KEEP_OUR_LINES
    + r"""
import json, sys, time
import jax
from jax._src import distributed
address, count, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
jax.distributed.initialize(address, count, pid, local_device_ids=[0], initialization_timeout=120)
distributed.global_state.client.wait_at_barrier("bench-start", 120_000)
began, cpu, main = time.perf_counter(), time.process_time(), time.thread_time()
jax.devices()
seconds, cpu, main = time.perf_counter() - began, time.process_time() - cpu, time.thread_time() - main
said = {
    "warm": any("(the plan of the last start)" in m for m in seen),
    "check": next((m for m in seen if m.startswith("job check: ")), ""),
}
print("BENCH " + json.dumps({"seconds": seconds, "cpu": cpu, "main": main, **said}), flush=True)
"""
)
BARE = """import os
import time


def initialize():
    from jax._src import xla_bridge

    spend = float(os.environ.get("BARE_SPEND_MS", "0")) / 1000  # --floor: a fixed CPU cost, nothing else
    began = time.thread_time()
    while time.thread_time() - began < spend:
        pass
    xla_bridge.register_plugin("rocm", priority=500, library_path=os.environ["BARE_LIBRARY"])
"""


def job(
    python: str,
    library: Path,
    count: int,
    machine: Path,
    cache: Path,
    bare: Path | None,
    extra: dict[str, str] | None = None,
) -> list[dict]:
    """One job of `count` processes; each process's BENCH record. `extra`: more variables for every process."""
    port = free_port()
    processes = []
    for pid in range(count):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_", "HIP_"))}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled modules kept, as an installed wheel has them
        env.update(JAX_PLATFORMS="rocm", HIP_VISIBLE_DEVICES=str(pid), XDG_CACHE_HOME=str(cache))
        if bare is None:
            env.update(JAX_ROCM_SYSROOT=str(machine), JAX_ROCM_PJRT_LIBRARY=str(library), PYTHONPATH=str(REPO))
        else:
            env.update(BARE_LIBRARY=str(library), PYTHONPATH=str(bare))
        env.update(extra or {})
        argv = [python, "-c", PROCESS, f"127.0.0.1:{port}", str(count), str(pid)]
        processes.append(subprocess.Popen(argv, env=env, cwd=cache.parent, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE))  # fmt: skip
    return bench_records(processes)


PARTS = {  # what each side of --by-part turns off
    "ours": {},
    "no hang watcher": {"JAX_ROCM_HANG_TIMEOUT": "off"},
    "no watcher, no check": {"JAX_ROCM_HANG_TIMEOUT": "off", "JAX_ROCM_JOB_CHECK": "off"},
}


def stamped_copy(work: Path) -> dict[str, str]:
    """The variables that put a stamped copy of this checkout's package first (--stamped)."""
    import shutil

    from jax_rocm7_build.assemble import source_digest

    overlay = work / "stamped"
    package = overlay / "jax_rocm7_plugin"
    shutil.copytree(REPO / "jax_rocm7_plugin", package, ignore=shutil.ignore_patterns("__pycache__"))
    version = package / "version.py"
    text = version.read_text()
    stamped = text.replace("SOURCE_DIGEST = None", f'SOURCE_DIGEST = "{source_digest(package)}"')
    if stamped == text:
        raise SystemExit(f"{version}: no `SOURCE_DIGEST = None` line to stamp")
    version.write_text(stamped)
    return {"PYTHONPATH": os.pathsep.join([str(overlay), str(REPO)])}


def by_part(options: argparse.Namespace, machine: Path, work: Path, bare: Path, our_env: dict[str, str]) -> None:
    for count in options.processes:
        cpu: dict[str, list[float]] = {name: [] for name in [*PARTS, "bare"]}
        main: dict[str, list[float]] = {name: [] for name in cpu}
        for extra in PARTS.values():  # each side's first job (its own plan): not timed
            job(options.python, options.library, count, machine, work / f"cache-{count}", None, {**our_env, **extra})
        for _ in range(options.pairs):
            for name in cpu:
                extra, side = ({**our_env, **PARTS[name]}, None) if name in PARTS else ({}, bare)
                cache = work / ("cache-bare" if side else f"cache-{count}")
                for found in job(options.python, options.library, count, machine, cache, side, extra):
                    cpu[name].append(found["cpu"] * 1000)
                    main[name].append(found["main"] * 1000)
        print(f"{count} process(es), warm, CPU per process during jax.devices(), all threads / main thread:")
        base_cpu, base_main = statistics.median(cpu["bare"]), statistics.median(main["bare"])
        for name in cpu:
            all_threads, main_thread = statistics.median(cpu[name]), statistics.median(main[name])
            added = f"  (added {all_threads - base_cpu:+.1f} / {main_thread - base_main:+.1f})"
            print(f"    {name:22s} {all_threads:5.1f} / {main_thread:5.1f} ms{'' if name == 'bare' else added}")


def floor(options: argparse.Namespace, machine: Path, work: Path, bare: Path) -> None:
    """--floor: what MS ms of CPU per process adds to the slowest process's wall time at each N, on this machine."""
    for count in options.processes:
        for spend in options.floor:
            plain, spending, cpu_plain, cpu_spending = [], [], [], []
            for _ in range(options.pairs):
                extra = {"BARE_SPEND_MS": f"{spend:g}"}
                found = job(options.python, options.library, count, machine, work / "cache-bare", bare, extra)
                spending.append(max(f["seconds"] for f in found) * 1000)
                cpu_spending += [f["cpu"] * 1000 for f in found]
                found = job(options.python, options.library, count, machine, work / "cache-bare", bare)
                plain.append(max(f["seconds"] for f in found) * 1000)
                cpu_plain += [f["cpu"] * 1000 for f in found]
            added = statistics.median(a - b for a, b in zip(spending, plain, strict=True))
            cpu_added = statistics.mean(cpu_spending) - statistics.mean(cpu_plain)
            print(
                f"{count} processes, {spend:g} ms of CPU each: slowest process {added:+.1f} ms "
                f"(x{added / spend:.2f}); CPU added per process {cpu_added:+.1f} ms"
            )


def spread(samples: list[float]) -> str:
    return f"{statistics.median(samples):6.1f} ms ({min(samples):.1f}-{max(samples):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", type=Path, required=True, help="a PJRT plugin library (the stand-in)")
    parser.add_argument("--processes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--modes", nargs="+", choices=("warm", "cold"), default=["warm", "cold"])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--by-part", action="store_true", help="where a warm process's added CPU goes")
    parser.add_argument("--stamped", action="store_true", help="our package as an installed build is (stamped)")
    parser.add_argument("--floor", type=float, nargs="+", metavar="MS", help="calibrate: a fixed CPU cost per process")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        bare = work / "bare"
        (bare / "jax_plugins" / "bare").mkdir(parents=True)
        (bare / "jax_plugins" / "bare" / "__init__.py").write_text(BARE)
        machine = host_sysroot(work / "machine", "node-0", [], node=HEALTHY_NODES[NODE])
        our_env = stamped_copy(work) if options.stamped else {}
        if options.by_part:
            by_part(options, machine, work, bare, our_env)
            return
        if options.floor:
            floor(options, machine, work, bare)
            return
        for count in options.processes:
            for mode in options.modes:
                ours, theirs, said, cpu_ours, cpu_theirs = [], [], [], [], []
                cache = work / f"cache-{count}-warm"
                if mode == "warm":
                    job(options.python, options.library, count, machine, cache, None, our_env)  # not timed
                for n in range(options.pairs):
                    if mode == "cold":
                        cache = work / f"cache-{count}-cold-{n}"
                    found = job(options.python, options.library, count, machine, cache, None, our_env)
                    ours.append(max(f["seconds"] for f in found) * 1000)
                    cpu_ours += [f["cpu"] * 1000 for f in found]
                    said.append((sum(f["warm"] for f in found), found[0]["check"]))
                    bare_found = job(options.python, options.library, count, machine, work / "cache-bare", bare)
                    theirs.append(max(f["seconds"] for f in bare_found) * 1000)
                    cpu_theirs += [f["cpu"] * 1000 for f in bare_found]  # fmt: skip
                added = statistics.median(a - b for a, b in zip(ours, theirs, strict=True))
                print(f"{count} processes, {mode}: ours {spread(ours)}, bare {spread(theirs)}, added {added:+.1f} ms")
                print(
                    f"    CPU per process (all its threads) during jax.devices(): ours "
                    f"{statistics.median(cpu_ours):.1f} ms, bare {statistics.median(cpu_theirs):.1f} ms"
                )
                warm_counts = sorted({w for w, _ in said})
                print(f"    processes on the plan per job: {warm_counts}; process 0: {said[-1][1]}")


if __name__ == "__main__":
    main()
