#!/usr/bin/env python3
"""Before/after: `import jax; jax.devices()` in two venvs (say, the pair built at two commits), interleaved.

Runs alternate (ABBA) so drift in machine load hits both sides alike; prints both medians and the
median of the per-pair ratios B/A. Run it from outside the repository root.

    python benchmarks/compare_venvs.py BEFORE/bin/python AFTER/bin/python [--runs 40] [--gpu-path]

`--gpu-path`: instead, what our code costs at `jax.devices()` on a synthetic 8 x gfx942 machine with the
pair's library and a warm load verdict (import_overhead.py's GPU path, timed inside each process).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections.abc import Callable

COMMAND = "import jax; jax.devices()"


def timed_run(python: str) -> float:
    start = time.perf_counter()
    subprocess.run([python, "-c", COMMAND], check=True, capture_output=True)
    return time.perf_counter() - start


def gpu_path_runner() -> Callable[[str], float]:
    """Milliseconds of our entry module + initialize() in a process of `python`, on the synthetic machine."""
    import os
    import sys
    import tempfile
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(repo))
    from benchmarks.import_overhead import GPU_PATH
    from tests.support.sysroots import Gpu, make_sysroot

    work = Path(tempfile.mkdtemp(prefix="gpu-path-"))
    root = make_sysroot(work / "machine", [Gpu(drm_render_minor=128 + i) for i in range(8)])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    env["JAX_ROCM_SYSROOT"] = str(root)

    def run(python: str) -> float:
        cache = work / f"cache-{abs(hash(python))}"  # one verdict cache per venv, warm after the first run
        done = subprocess.run(
            [python, "-c", GPU_PATH], env={**env, "XDG_CACHE_HOME": str(cache)}, check=True, capture_output=True
        )
        return float(done.stdout) / 1e3

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", help="python of the first venv (A)")
    parser.add_argument("after", help="python of the second venv (B)")
    parser.add_argument("--runs", type=int, default=40, help="pairs of runs (default 40)")
    parser.add_argument("--gpu-path", action="store_true", help="time our code on a synthetic 8-GPU machine")
    args = parser.parse_args()
    run = gpu_path_runner() if args.gpu_path else timed_run
    for python in (args.before, args.after):  # warm the page cache, the .pyc files and the verdicts
        run(python)
    before, after, ratios = [], [], []
    for pair in range(args.runs):
        order = (args.before, args.after) if pair % 2 == 0 else (args.after, args.before)
        seconds = {python: run(python) for python in order}
        before.append(seconds[args.before])
        after.append(seconds[args.after])
        ratios.append(seconds[args.after] / seconds[args.before])
    low, _, high = statistics.quantiles(ratios, n=4)
    what = "our entry module + initialize() on 8 x gfx942, warm verdict" if args.gpu_path else f"python -c {COMMAND!r}"
    print(f"{what}  ({args.runs} pairs, ABBA order)")
    print(f"A: median {statistics.median(before) * 1e3:.1f} ms")
    print(f"B: median {statistics.median(after) * 1e3:.1f} ms")
    print(f"median ratio B/A: {statistics.median(ratios):.4f} (IQR {low:.3f}-{high:.3f})")


if __name__ == "__main__":
    main()
