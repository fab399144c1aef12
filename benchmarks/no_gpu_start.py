"""What our plugin's own import and initialize() cost a process on a machine without an AMD GPU (this one), the first
start and every start after it, for this checkout and, with --base, another one, interleaved.

Each run is a fresh process of PYTHON (a CPython with jax) that imports what jax has imported by the time it calls
plugins (jax._src.xla_bridge), then times `import jax_plugins.rocm7; initialize()`: wall and CPU time. Bytecode is
compiled first for both checkouts (where PYTHONDONTWRITEBYTECODE is set, each process would compile the files it
imports). Run it from outside the project root, with nothing else running:

    python /path/to/benchmarks/no_gpu_start.py [--base OTHER_CHECKOUT] [--runs 15] [--python PYTHON]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CODE = """
import logging, time
import jax._src.xla_bridge
logging.getLogger("jax_rocm7_plugin").propagate = False
wall, cpu = time.perf_counter(), time.process_time()
import jax_plugins.rocm7 as entry
entry.initialize()
print((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000)
"""


def run(python: str, checkout: Path, cache: Path) -> tuple[float, float]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_", "HIP_", "ROCR_"))}
    environ.update(PYTHONPATH=str(checkout), XDG_CACHE_HOME=str(cache))
    done = subprocess.run([python, "-c", CODE], env=environ, capture_output=True, text=True, check=True)
    wall, cpu = done.stdout.split()
    return float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="another checkout, measured interleaved with this one")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--python", default=sys.executable, help="a CPython with jax and jaxlib")
    args = parser.parse_args()
    sides = {"this checkout": REPO, **({f"base ({args.base})": args.base.resolve()} if args.base else {})}
    for checkout in sides.values():
        for folder in ("jax_rocm7_plugin", "jax_plugins"):
            subprocess.run(
                [args.python, "-m", "compileall", "-q", str(checkout / folder)], check=True, stdout=subprocess.DEVNULL
            )
    with tempfile.TemporaryDirectory(prefix="no-gpu-start-") as work:
        first: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        later: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        for n in range(args.runs):
            for name, checkout in sides.items():
                cache = Path(work) / f"{name[:4]}-{n}"
                first[name].append(run(args.python, checkout, cache))  # nothing cached
                later[name].append(run(args.python, checkout, cache))  # the plan of the first start
        for label, table in (("first start", first), ("a later start", later)):
            for name, samples in table.items():
                wall = statistics.median(w for w, _ in samples)
                cpu = statistics.median(c for _, c in samples)
                print(
                    f"{label:<14} {name:<40} wall median {wall:6.2f} ms   cpu median {cpu:6.2f} ms  (n={len(samples)})"
                )


if __name__ == "__main__":
    main()
