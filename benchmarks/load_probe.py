#!/usr/bin/env python3
"""What the crash-safe load costs: the loader's child-process test of the PJRT library, the first
time (no verdict cached) and later (verdict read from $XDG_CACHE_HOME), in the probe itself and in
`import jax; jax.devices()` on a machine where the backend comes up.

    python benchmarks/load_probe.py --python VENV/bin/python --library LIB.so --sysroot GPU_SYSROOT
                                    [--ld-library-path DIR] [--runs 9]

The venv must hold jax and our pair; the sysroot must show a usable GPU (tests/support/sysroots.py makes one).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROBE = """
import os, sys, time
from pathlib import Path
from jax_rocm7_plugin._binary import load_test
from jax_rocm7_plugin._settings import read_settings
start = time.perf_counter()
settings = read_settings(os.environ)  # the loader reads the environment once, then probes
verdict = load_test.probe(Path(sys.argv[1]), "pjrt", settings)
print((time.perf_counter() - start) * 1000, verdict.cached, verdict.loaded)
"""
COMMAND = "import jax; jax.devices()"


def run(python: str, args: list[str], env: dict[str, str], check: bool = True) -> tuple[float, str]:
    """Wall time of one run; `check=False` for a library whose backend fails later (no GPU here)."""
    start = time.perf_counter()
    done = subprocess.run([python, *args], env=env, capture_output=True, text=True, check=check)
    return (time.perf_counter() - start) * 1000, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True)
    parser.add_argument("--library", required=True, type=Path)
    parser.add_argument("--sysroot", required=True, type=Path)
    parser.add_argument("--ld-library-path", default="")
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    base.update(JAX_ROCM_SYSROOT=str(args.sysroot), JAX_ROCM_PJRT_LIBRARY=str(args.library.resolve()))
    if args.ld_library_path:
        base["LD_LIBRARY_PATH"] = args.ld_library_path
    probe_cold, probe_warm, import_cold, import_warm = [], [], [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            env = {**base, "XDG_CACHE_HOME": cache}
            _, out = run(args.python, ["-c", PROBE, str(args.library)], env)
            probe_cold.append(float(out.split()[0]))
            _, out = run(args.python, ["-c", PROBE, str(args.library)], env)
            assert out.split()[1] == "True", "the second probe did not find the cached verdict"
            probe_warm.append(float(out.split()[0]))
        with tempfile.TemporaryDirectory() as cache:
            env = {**base, "XDG_CACHE_HOME": cache}
            import_cold.append(run(args.python, ["-c", COMMAND], env, check=False)[0])
            import_warm.append(run(args.python, ["-c", COMMAND], env, check=False)[0])
    size = args.library.stat().st_size / 1e6
    print(f"library {args.library} ({size:.0f} MB), {args.runs} runs, medians:")
    print(f"probe, first (child process loads it): {statistics.median(probe_cold):8.1f} ms")
    print(f"probe, later (cached verdict):         {statistics.median(probe_warm):8.2f} ms")
    print(f"`{COMMAND}`, first:  {statistics.median(import_cold):8.1f} ms")
    print(f"`{COMMAND}`, later:  {statistics.median(import_warm):8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
