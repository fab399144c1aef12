"""What the plugin costs `import jax; jax.devices()` against a bare registration of the same library.

    python benchmarks/warm_path.py --library PATH [--pairs 11] [--python PYTHON]

Run it from outside the project root, with nothing else running. Each run is a fresh process of PYTHON (a
CPython with jax and jaxlib, and without our pair installed: this checkout is put on PYTHONPATH for "ours").
It times `jax.devices()` in the process, after `import jax`: jax's plugin discovery, our loader, jax's load of
the library and the client's creation. The other side is "bare": a `jax_plugins` module of four lines that
calls `xla_bridge.register_plugin('rocm', library_path=PATH)` on the same library and checks nothing.

Our side runs on a synthetic machine of 8 x gfx942 (JAX_ROCM_SYSROOT, tests/support/sysroots.py):
- warm: the plan and the load verdict of an earlier start are cached (the steady state of every start after
  the first);
- verdict only: the load verdict is cached but the plan is not used (JAX_ROCM_WARM=0), which is what every
  start paid before the warm path;
- cold: nothing is cached (a first start on a machine: the child-process load test runs).
The sides alternate (ours, bare, ours, bare ...), so that drift in the machine's load hits both alike. It
prints each side's median and spread (min-max), and the median of the per-pair differences.

Without a GPU, jaxlib imports our extension modules by name during `import jax` (jax_rocm7_plugin._linalg,
...: each a two-line stub that calls _loader.extensions.load_native, which refuses at once on a machine without a
usable AMD GPU). That cost is timed separately: importing every stub (they raise ImportError) in a process on a
machine without a GPU, after the standard modules `import jax` loads anyway (logging, typing, threading),
against importing as many modules that do not exist, which is what jaxlib meets without our pair.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEVICES = """
import time
import jax
start = time.perf_counter()
jax.devices()
print((time.perf_counter() - start) * 1000)
"""
BARE = """import os


def initialize():
    from jax._src import xla_bridge

    xla_bridge.register_plugin("rocm", priority=500, library_path=os.environ["BARE_LIBRARY"])
"""
STUBS = """
import importlib, logging, sys, threading, time, typing  # what `import jax` has loaded before jaxlib imports them
names = sys.argv[1:]
start = time.perf_counter()
for name in names:
    try:
        importlib.import_module(name)
    except ImportError:
        pass
print((time.perf_counter() - start) * 1000)
"""


def run_ms(python: str, code: str, environ: dict[str, str], *args: str) -> float:
    done = subprocess.run([python, "-c", code, *args], env=environ, capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def spread(samples: list[float]) -> str:
    return f"median {statistics.median(samples):7.2f} ms (min {min(samples):.2f}, max {max(samples):.2f})"


def compare(name: str, pairs: int, ours: callable, bare: callable) -> float:  # type: ignore[valid-type]
    mine, theirs = [], []
    for _ in range(pairs):
        mine.append(ours())
        theirs.append(bare())
    difference = statistics.median(a - b for a, b in zip(mine, theirs, strict=True))
    print(f"{name:<34} ours {spread(mine)}   bare {spread(theirs)}   difference (median of pairs) {difference:+.2f} ms")
    return difference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", type=Path, required=True, help="the PJRT library both sides register")
    parser.add_argument("--pairs", type=int, default=11)
    parser.add_argument("--python", default=sys.executable, help="a CPython with jax and jaxlib, without our pair")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from jax_rocm7_plugin._names import EXTENSION_MODULES, PLUGIN_PACKAGE
    from tests.support.sysroots import Gpu, make_sysroot

    clean = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_", "HIP_", "HSA_", "ROCR_"))}
    clean.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed packages run: from their bytecode
    with tempfile.TemporaryDirectory(prefix="warm-path-") as work_dir:
        work = Path(work_dir)
        machine = make_sysroot(work / "machine", [Gpu(drm_render_minor=128 + i) for i in range(8)])
        bare_dir = work / "bare" / "jax_plugins" / "bare_rocm"
        bare_dir.mkdir(parents=True)
        (bare_dir / "__init__.py").write_text(BARE)
        ours_env = {
            **clean,
            "PYTHONPATH": str(REPO),
            "JAX_ROCM_SYSROOT": str(machine),
            "JAX_ROCM_PJRT_LIBRARY": str(args.library),
            "XDG_CACHE_HOME": str(work / "cache"),
        }
        bare_env = {**clean, "PYTHONPATH": str(work / "bare"), "BARE_LIBRARY": str(args.library)}
        print(f"{args.python}, {args.library.name}, {args.pairs} pairs, synthetic 8 x gfx942\n")
        for _ in range(2):  # the first start writes the verdict and the plan; bytecode is written by both
            run_ms(args.python, DEVICES, ours_env)
            run_ms(args.python, DEVICES, bare_env)
        compare(
            "jax.devices(), warm",
            args.pairs,
            lambda: run_ms(args.python, DEVICES, ours_env),
            lambda: run_ms(args.python, DEVICES, bare_env),
        )
        verdict_only = {**ours_env, "JAX_ROCM_WARM": "0"}
        compare(
            "jax.devices(), verdict only",
            args.pairs,
            lambda: run_ms(args.python, DEVICES, verdict_only),
            lambda: run_ms(args.python, DEVICES, bare_env),
        )

        def cold() -> float:
            shutil.rmtree(work / "cache", ignore_errors=True)
            return run_ms(args.python, DEVICES, ours_env)

        compare(
            "jax.devices(), cold (nothing cached)",
            max(3, args.pairs // 2),
            cold,
            lambda: run_ms(args.python, DEVICES, bare_env),
        )

        # The extension modules without a GPU: every stub, as the build writes them, in a copy of the package.
        from jax_rocm7_build.extension_modules import public_stub_source

        staged = work / "staged"
        shutil.copytree(REPO / PLUGIN_PACKAGE, staged / PLUGIN_PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
        for module in EXTENSION_MODULES:
            (staged / PLUGIN_PACKAGE / f"{module}.py").write_text(public_stub_source(module))
        no_gpu = make_sysroot(work / "no-gpu", [], topology=False, amdgpu_module=False, kfd=False)
        stubs_env = {**clean, "PYTHONPATH": str(staged), "JAX_ROCM_SYSROOT": str(no_gpu), "XDG_CACHE_HOME": str(work)}
        names = [f"{PLUGIN_PACKAGE}.{m}" for m in EXTENSION_MODULES]
        absent = [f"not_installed_plugin.{m}" for m in EXTENSION_MODULES]
        run_ms(args.python, STUBS, stubs_env, *names)  # bytecode
        compare(
            f"{len(names)} extension modules, no GPU",
            args.pairs,
            lambda: run_ms(args.python, STUBS, stubs_env, *names),
            lambda: run_ms(args.python, STUBS, bare_env, *absent),
        )


if __name__ == "__main__":
    main()
