#!/usr/bin/env python3
"""Before/after: `import jax; jax.devices()` in two venvs (say, the pair built at two commits), interleaved.

Runs alternate (ABBA) so drift in machine load hits both sides alike; prints both medians and the
median of the per-pair ratios B/A. Run it from outside the repository root.

    python benchmarks/compare_venvs.py BEFORE/bin/python AFTER/bin/python [--runs 40]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

COMMAND = "import jax; jax.devices()"


def timed_run(python: str) -> float:
    start = time.perf_counter()
    subprocess.run([python, "-c", COMMAND], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", help="python of the first venv (A)")
    parser.add_argument("after", help="python of the second venv (B)")
    parser.add_argument("--runs", type=int, default=40, help="pairs of runs (default 40)")
    args = parser.parse_args()
    for python in (args.before, args.after):  # warm the page cache and the .pyc files
        timed_run(python)
    before, after, ratios = [], [], []
    for pair in range(args.runs):
        order = (args.before, args.after) if pair % 2 == 0 else (args.after, args.before)
        seconds = {python: timed_run(python) for python in order}
        before.append(seconds[args.before])
        after.append(seconds[args.after])
        ratios.append(seconds[args.after] / seconds[args.before])
    low, _, high = statistics.quantiles(ratios, n=4)
    print(f"command: python -c {COMMAND!r}  ({args.runs} pairs, ABBA order)")
    print(f"A: median {statistics.median(before) * 1e3:.1f} ms")
    print(f"B: median {statistics.median(after) * 1e3:.1f} ms")
    print(f"median ratio B/A: {statistics.median(ratios):.4f} (IQR {low:.3f}-{high:.3f})")


if __name__ == "__main__":
    main()
