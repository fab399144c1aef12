"""How long the cluster preflight takes, end to end and in process 0's comparison.

    python benchmarks/cluster_preflight.py --library PATH [--processes 2 4 8] [--runs 3]
                                           [--records 1000 5000 10000] [--python PY]

Prints, for each process count, the wall time from starting N real processes of
`python -m jax_rocm7_plugin cluster` on localhost (each with its own synthetic sysroot of one
gfx942 GPU, from tests/support/cluster.py, and PATH as the library) until the last one exits:
the courier's jax import, the doctor, the library's sha256, the join and the exchange (median,
min, max). Then process 0's comparison of N synthetic records (tests/support/records.py; one odd
ROCm host among hosts of 8 processes): decoding the published JSON and `compare()`, each timed
separately; the goal is well under 1 s for 10,000
and growth in proportion to N. Run it from outside the repository, with nothing else heavy running.
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from jax_rocm7_plugin._job.compare import compare  # noqa: E402
from jax_rocm7_plugin._job.record import RocmFact, decode, encode  # noqa: E402
from tests.support.cluster import free_port, gpus_with_ids, host_sysroot, routable_address  # noqa: E402
from tests.support.records import job  # noqa: E402


def preflight_seconds(python: str, library: Path, count: int, workdir: Path) -> float:
    port = free_port()
    processes = []
    started = time.perf_counter()
    for process in range(count):
        root = host_sysroot(workdir / f"run{port}-p{process}", f"node-{process}", gpus_with_ids(1))
        env = {**os.environ, "JAX_ROCM_SYSROOT": str(root), "JAX_ROCM_PJRT_LIBRARY": str(library)}
        env["PYTHONPATH"] = str(REPO)
        argv = [python, "-m", "jax_rocm7_plugin", "cluster", "--coordinator-address", f"{routable_address()}:{port}"]
        argv += ["--num-processes", str(count), "--process-id", str(process), "--json", "--local-device-ids", "0"]
        processes.append(subprocess.Popen(argv, env=env, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outputs = [p.communicate(timeout=120) for p in processes]
    elapsed = time.perf_counter() - started
    report = json.loads(outputs[0][0])
    if report["verdict"] != "consistent":
        raise SystemExit(f"the preflight found problems: {json.dumps(report['findings'])[:2000]}")
    return elapsed


def synthetic_records(count: int) -> list[str]:
    """`count` published records: hosts of 8 processes (tests/support/records.py), host gpu-17 on another ROCm."""
    odd = {"rocm": RocmFact("7.1.1", "/opt/rocm", "/opt/rocm")}
    return [encode(r) for r in job(count, {p: odd for p in range(136, 144)}).values()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", type=Path, required=True, help="a PJRT library (e.g. xla_cpu_pjrt.so)")
    parser.add_argument("--processes", type=int, nargs="*", default=[2, 4, 8])
    parser.add_argument("--records", type=int, nargs="*", default=[1000, 5000, 10000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--python", default=sys.executable, help="an interpreter with jax installed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as directory:
        for count in args.processes:
            samples = [preflight_seconds(args.python, args.library, count, Path(directory)) for _ in range(args.runs)]
            print(
                f"preflight, {count} processes: median {statistics.median(samples):6.2f} s   "
                f"min {min(samples):6.2f}   max {max(samples):6.2f}   (n={len(samples)})"
            )
    for count in args.records:
        texts = synthetic_records(count)
        started = time.perf_counter()
        shared: dict[str, dict[str, object]] = {}
        records = {r.process_id: r for r in (decode(t, shared) for t in texts)}
        decoded = time.perf_counter() - started
        started = time.perf_counter()
        findings = compare(records)
        compared = time.perf_counter() - started
        size = sum(len(t) for t in texts) / count
        print(
            f"process 0, {count:>6} records (~{size:.0f} B each): decode {decoded * 1000:7.1f} ms   "
            f"compare {compared * 1000:7.1f} ms   findings {[f.id for f in findings]}"
        )


if __name__ == "__main__":
    main()
