"""What the job check at backend start costs.

    python benchmarks/job_check.py --library PATH [--processes 2 4 8] [--runs 5] [--records 10000]

1. Backend start with the check on and off, interleaved (on, off, on, off, ...): N real processes on
   localhost join jax.distributed, meet at a barrier of the coordination service (so that what follows
   starts together), then time `jax.devices("rocm")` with JAX_PLATFORMS=rocm: our loader's checks, the job
   check where it is on, and the stand-in client (PATH, registered as 'rocm'; each process its own
   synthetic sysroot of gfx942 GPUs, tests/support/cluster.py). Printed per N: the median over processes
   and runs of that time, on and off, and their difference (the added time per process, waiting for the
   slowest included); and the check's own time as its debug line states it, wall and this process's CPU
   (the thread's CPU time: the work, without the waiting). Goal: <= 20 ms added at 8, beyond waiting.
2. Process 0's work on N synthetic fingerprints (tests/support/records.py, one odd host): decoding the
   published JSON, the comparison and the verdict, timed apart. Goal: <= 0.3 s at 10,000.
3. `--collect N ...`: process 0's collection of N published records (those fingerprints, encoded) from jaxlib's
   real coordination service, in a child process that hosts the service and published them: `read_published`
   as the job check calls it (one listing, then reads for the missing), against a blocking read per process
   (what it did before).

Run it from outside the repository, with nothing else heavy running.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from jax_rocm7_plugin._job import check  # noqa: E402
from jax_rocm7_plugin._job.compare import compare_at_backend_start  # noqa: E402
from jax_rocm7_plugin._job.record import RocmFact, decode, encode  # noqa: E402
from tests.support.cluster import free_port, gpus_with_ids, host_sysroot  # noqa: E402
from tests.support.records import job  # noqa: E402

# One process of the job: join, meet the others, then time the rocm backend's start.
# Our logger's messages kept in `seen` (debug included), nothing printed: what a timed process says of itself.
KEEP_OUR_LINES = r"""
import logging
seen = []
class Keep(logging.Handler):
    def emit(self, record):
        seen.append(record.getMessage())
logger = logging.getLogger("jax_rocm7_plugin")
logger.setLevel(logging.DEBUG)
logger.addHandler(Keep())
logger.propagate = False
"""
PROCESS = (
    KEEP_OUR_LINES
    + r"""
import json, sys, time
import jax
from jax._src import distributed
address, count, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
jax.distributed.initialize(address, count, pid, local_device_ids=[pid], initialization_timeout=120)
distributed.global_state.client.wait_at_barrier("bench-start", 120_000)
began = time.perf_counter()
jax.devices("rocm")
seconds = time.perf_counter() - began
own = [m.split(" in ")[1].split() for m in seen if m.startswith("job check: ")]
check = {"check_ms": float(own[0][0]), "cpu_ms": float(own[0][2].lstrip("("))} if own else {}
print("BENCH " + json.dumps({"seconds": seconds, **check}), flush=True)
"""
)


def backend_start(python: str, library: Path, count: int, work: Path, on: bool) -> list[dict[str, float]]:
    port = free_port()
    processes = []
    for pid in range(count):
        root = host_sysroot(work / f"p{pid}", "node-0", gpus_with_ids(count))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
        # Compiled modules kept, as an installed wheel has them (pip compiles them at install).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(
            JAX_PLATFORMS="rocm",
            JAX_ROCM_SYSROOT=str(root),
            JAX_ROCM_PJRT_LIBRARY=str(library),
            JAX_ROCM_JOB_CHECK="error" if on else "off",
            PYTHONPATH=str(REPO),
            XDG_CACHE_HOME=str(work / "cache"),
        )
        argv = [python, "-c", PROCESS, f"127.0.0.1:{port}", str(count), str(pid)]
        processes.append(subprocess.Popen(argv, env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
    return bench_records(processes)


def bench_records(processes: list[subprocess.Popen[bytes]]) -> list[dict[str, Any]]:
    """Each process's BENCH record, in order; a process that failed ends the benchmark with its output's tail."""
    found = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        lines = [line for line in out.decode().splitlines() if line.startswith("BENCH ")]
        if process.returncode != 0 or not lines:
            raise SystemExit(f"a process failed (exit {process.returncode}): {(err or out).decode()[-1200:]}")
        found.append(json.loads(lines[0][6:]))
    return found


COLLECT = r"""
import json, os, sys, time
from jax._src.lib import _jax as xla
from jax_rocm7_plugin._job import store
from tests.support.cluster import free_port

texts = json.load(sys.stdin)
port = free_port()
service = xla.get_distributed_runtime_service(f"[::]:{port}", 1, heartbeat_timeout=60, shutdown_timeout=5)
client = xla.get_distributed_runtime_client(
    f"127.0.0.1:{port}", 0, init_timeout=20, heartbeat_timeout=60, shutdown_on_destruction=False
)
client.connect()
for process, text in texts.items():
    client.key_value_set(f"bench/record/{process}", text)
wanted = range(1, len(texts))
timings = {}
for name, first_from in (("listing first", store.LIST_FIRST_FROM), ("a read per process", 10**9)):
    store.LIST_FIRST_FROM = first_from
    began = time.perf_counter()
    found = store.read_published(client, "bench/record", wanted, time.monotonic() + 60)
    timings[name] = time.perf_counter() - began
    assert len(found) == len(wanted), len(found)
print("BENCH " + json.dumps(timings), flush=True)
os._exit(0)  # the service and its client are torn down without an orderly shutdown, which aborts
"""


def collection(python: str, count: int) -> dict[str, float]:
    """Process 0's collection of `count` encoded records from the real service: seconds per way of reading."""
    records = job(count, {})
    texts = {pid: encode(r) for pid, r in records.items()}
    done = subprocess.run(
        [python, "-c", COLLECT],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("BENCH ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"the collection failed (exit {done.returncode}): {done.stderr[-1200:]}")
    return json.loads(lines[0][6:])


def comparison(count: int) -> tuple[float, float, float]:
    records = job(count, {p: {"rocm": RocmFact("6.4.1", "/opt/rocm", "/opt/rocm")} for p in range(8, 16)})
    texts = {pid: encode(r) for pid, r in records.items()}
    began = time.perf_counter()
    shared: dict[str, dict[str, object]] = {}
    decoded = {pid: decode(text, shared) for pid, text in texts.items()}
    decoding = time.perf_counter() - began
    began = time.perf_counter()
    findings = tuple(compare_at_backend_start(decoded))
    comparing = time.perf_counter() - began
    began = time.perf_counter()
    verdict = check.decide(decoded, findings, (), check.DEFAULT_TIMEOUT_SECONDS)
    deciding = time.perf_counter() - began
    assert verdict.kind == "refuse" and verdict.processes == tuple(range(8, 16)), verdict
    return decoding, comparing, deciding


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", type=Path, required=True, help="a PJRT plugin library (the stand-in)")
    parser.add_argument("--processes", type=int, nargs="*", default=[2, 4, 8], help="none: process 0's work only")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--records", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--collect", type=int, nargs="*", default=[], help="records for the collection part")
    parser.add_argument("--python", default=sys.executable)
    options = parser.parse_args()
    print("backend start (jax.devices('rocm') after a barrier), median over processes and runs:")
    for count in options.processes:
        times: dict[bool, list[float]] = {True: [], False: []}
        own: list[float] = []
        cpu: list[float] = []
        with tempfile.TemporaryDirectory() as folder:
            for run in range(options.runs):
                for on in (True, False):
                    found = backend_start(options.python, options.library, count, Path(folder) / f"{run}{on}", on)
                    times[on] += [f["seconds"] for f in found]
                    own += [f["check_ms"] for f in found if on and "check_ms" in f]
                    cpu += [f["cpu_ms"] for f in found if on and "cpu_ms" in f]
        on_ms, off_ms = (statistics.median(times[k]) * 1000 for k in (True, False))
        print(
            f"  {count} processes: on {on_ms:.1f} ms, off {off_ms:.1f} ms, added {on_ms - off_ms:+.1f} ms; "
            f"the check's own time median {statistics.median(own):.1f} ms (max {max(own):.1f}), of which CPU "
            f"median {statistics.median(cpu):.1f} ms (max {max(cpu):.1f})"
        )
    print("process 0's work on N fingerprints:")
    for count in options.records:
        decoding, comparing, deciding = comparison(count)
        print(
            f"  {count}: decode {decoding * 1000:.0f} ms, compare {comparing * 1000:.0f} ms, "
            f"verdict {deciding * 1000:.1f} ms, total {(decoding + comparing + deciding) * 1000:.0f} ms"
        )
    if options.collect:
        print("process 0's collection of N published records from the real coordination service:")
    for count in options.collect:
        timings = collection(options.python, count)
        print(f"  {count}: " + ", ".join(f"{name} {seconds * 1000:.1f} ms" for name, seconds in timings.items()))


if __name__ == "__main__":
    main()
