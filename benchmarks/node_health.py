"""What reading a node's GPU health costs: the doctor's full read and judgement, and the job check's cheap read.

    python benchmarks/node_health.py [--runs N] [--gpus 8]

On synthetic nodes in the documented sysfs formats (tests/support/node_health.py: 8 x MI300X with XGMI links;
the same in CPX, 64 KFD nodes), in process, after one warm-up run (the files in the page cache). Prints medians
and min/max in milliseconds for:
- doctor: read_node(full) + health_findings, per node;
- job check at backend start: read_node(cheap) + summarised (what one process per host adds);
- hang watcher: the cheap read (at its start, off the main thread, and again at a hang).
A tmpfs tree answers faster than the driver: on a real GPU the RAS files ask the firmware (not measurable here).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def timed(call: object, runs: int) -> list[float]:
    call()  # type: ignore[operator]  # warm-up: page cache, imports
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        call()  # type: ignore[operator]
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def line(name: str, samples: list[float]) -> str:
    return (
        f"{name:<52} median {statistics.median(samples):7.2f} ms   min {min(samples):7.2f}   "
        f"max {max(samples):7.2f}   (n={len(samples)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    arguments = parser.parse_args()
    from tests.support.node_health import HEALTHY_NODES, make_node

    for name in ("8x MI300X (XGMI, SPX/NPS1)", "8x MI300X in CPX/NPS4 on purpose"):
        with tempfile.TemporaryDirectory() as folder:
            root = make_node(Path(folder) / "root", HEALTHY_NODES[name])
            measure(name, root, arguments.runs)


def measure(name: str, root: Path, runs: int) -> None:
    from jax_rocm7_plugin._job.record import summarised
    from jax_rocm7_plugin._machine.gpu_health import read_node
    from jax_rocm7_plugin._machine.health_findings import health_findings
    from jax_rocm7_plugin._machine.topology import read_topology

    topology = read_topology(root)
    print(f"{name}: {len(topology.gpus)} KFD GPU nodes")
    doctor = timed(lambda: health_findings(read_node(root, topology)), runs)
    print(line("  doctor: full read + findings", doctor))
    check = timed(lambda: summarised(read_node(root, topology, full=False)), runs)
    print(line("  job check: cheap read + record summary", check))
    watcher = timed(lambda: read_node(root, read_topology(root), full=False), runs)
    print(line("  hang watcher: topology + cheap read", watcher))


if __name__ == "__main__":
    main()
