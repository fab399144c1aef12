#!/usr/bin/env python3
"""What the wheel pair costs `import jax; jax.devices()` on a machine without an AMD GPU.

Paired runs: each pair runs the same command in a venv with jax X.Y.Z only and in
a venv with jax X.Y.Z plus our wheels (X.Y.Z is the wheels' release), in alternating
order (ABBA) so drift in machine load hits both sides alike. Prints both medians and
the median of the per-pair ratios (goal: <= 1.01).

    python benchmarks/import_overhead.py --wheels dist/ [--runs 40] [--python /path/to/python3.12]

`--gpu-path` measures the other side instead: a synthetic 8 x gfx942 machine (JAX_ROCM_SYSROOT,
tests/support/sysroots.py) with the pair's library, where the loader goes all the way to registering.
With jax already imported, it times what our code costs at `jax.devices()` (the entry module's
imports and initialize(), jax's own dlopen of the library left out): the first import of a process
on this machine (no load verdict cached: the child-process load test runs) and later ones (warm
verdict), and lists the `-X importtime` self time of our modules imported there.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMAND = "import jax; jax.devices()"


def ensure_venv(path: Path, packages: list[str], interpreter: str) -> Path:
    python = path / "bin" / "python"
    marker = path / ".packages"
    # Wheel files are identified by name, size and mtime, so a rebuilt wheel is reinstalled.
    wanted = "\n".join(
        f"{p}:{Path(p).stat().st_size}:{Path(p).stat().st_mtime_ns}" if Path(p).is_file() else p for p in packages
    )
    if not python.exists() or not marker.exists() or marker.read_text() != wanted:
        print(f"creating {path} with {', '.join(Path(p).name for p in packages)}", flush=True)
        subprocess.run([interpreter, "-m", "venv", "--clear", str(path)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True)
        marker.write_text(wanted)
    return python


def timed_run(python: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([str(python), "-c", COMMAND], check=True, env=env, capture_output=True)
    return time.perf_counter() - start


# The plugin's own share, measured inside the process: its imports plus initialize().
IN_PROCESS = """
import time, jax
start = time.perf_counter()
import jax_plugins.rocm7 as entry
entry.initialize()
print((time.perf_counter() - start) * 1000)
"""


def in_process_ms(python: Path, env: dict[str, str]) -> float:
    done = subprocess.run([str(python), "-c", IN_PROCESS], check=True, env=env, capture_output=True, text=True)
    return float(done.stdout.strip())


def importtime_ms(python: Path, env: dict[str, str]) -> tuple[float, float]:
    """Self time (ms) under `-X importtime` of our modules, and of jaxlib's gpu_* modules that import
    ours (where failed dlopens of extension modules would show)."""
    done = subprocess.run(
        [str(python), "-X", "importtime", "-c", COMMAND], check=True, env=env, capture_output=True, text=True
    )
    ours = theirs = 0.0
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[0].startswith("import time:"):
            continue
        try:
            self_us = float(parts[0].split(":")[1])
        except ValueError:
            continue
        name = parts[2].strip()
        if name.startswith(("jax_rocm7_plugin", "jax_plugins.rocm7", "jax_rocm7_pjrt")):
            ours += self_us / 1000
        elif name.startswith("jaxlib.gpu_"):
            theirs += self_us / 1000
    return ours, theirs


# jax imported first; jax's register_plugin (its dlopen of the library and the C API handshake) is jax's
# cost, not ours, so it is replaced by a no-op here.
GPU_PATH = """
import sys, time, jax
from jax._src import xla_bridge
xla_bridge.register_plugin = lambda *args, **kwargs: None
print("--- ours from here", file=sys.stderr)
start = time.perf_counter()
import jax_plugins.rocm7 as entry
entry.initialize()
print((time.perf_counter() - start) * 1000)
"""


def gpu_path(python: Path, env: dict[str, str], runs: int) -> None:
    import tempfile

    sys.path.insert(0, str(REPO))
    from tests.support.sysroots import Gpu, make_sysroot

    work = Path(tempfile.mkdtemp(prefix="gpu-path-"))
    root = make_sysroot(work / "machine", [Gpu(drm_render_minor=128 + i) for i in range(8)])
    env = {**env, "JAX_ROCM_SYSROOT": str(root)}

    def once(cache: Path, *flags: str) -> subprocess.CompletedProcess[str]:
        command = [str(python), *flags, "-c", GPU_PATH]
        return subprocess.run(
            command, check=True, env={**env, "XDG_CACHE_HOME": str(cache)}, capture_output=True, text=True
        )

    first = [float(once(work / f"cold-{i}").stdout) for i in range(runs)]
    warm = work / "warm"
    once(warm)
    later = [float(once(warm).stdout) for _ in range(runs)]
    print("GPU path (8 x gfx942, synthetic sysroot), jax imported, our entry module + initialize():")
    print(f"  first import (no verdict cached): median {statistics.median(first):.2f} ms")
    print(f"  later imports (warm verdict):     median {statistics.median(later):.2f} ms (min {min(later):.2f})")
    modules: dict[str, list[float]] = {}
    for _ in range(11):
        stderr = once(warm, "-X", "importtime").stderr.split("--- ours from here", 1)[1]
        for line in stderr.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[0].startswith("import time:") and parts[0].split(":")[1].strip().isdigit():
                modules.setdefault(parts[2].strip(), []).append(float(parts[0].split(":")[1]) / 1000)
    self_ms = {name: statistics.median(values) for name, values in modules.items()}
    print(f"  -X importtime self time of modules imported there, median of 11: {sum(self_ms.values()):.2f} ms")
    for name, ms in sorted(self_ms.items(), key=lambda item: -item[1])[:8]:
        print(f"    {ms:.2f} ms {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path, default=REPO / "dist", help="directory holding the pair's wheels")
    parser.add_argument("--runs", type=int, default=40, help="pairs of runs (default 40)")
    parser.add_argument("--venvs", type=Path, default=REPO / ".bench", help="where the venvs live")
    parser.add_argument("--python", default=sys.executable, help="the CPython of both venvs (default: this one)")
    parser.add_argument("--gpu-path", action="store_true", help="time our code on a synthetic 8-GPU machine")
    args = parser.parse_args()

    wheels = sorted(str(p) for p in args.wheels.glob("jax_rocm7_*.whl"))
    plugins = [w for w in wheels if Path(w).name.startswith("jax_rocm7_plugin-")]
    if not any("pjrt" in w for w in wheels) or len(plugins) != 1:
        parser.error(f"{args.wheels} must hold a jax_rocm7_pjrt and one jax_rocm7_plugin wheel (build/build.py wheels)")
    release = ".".join(Path(plugins[0]).name.split("-")[1].split(".")[:3])
    pins = [f"jax=={release}", f"jaxlib=={release}"]
    tag = subprocess.run(
        [args.python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
    ).stdout.strip()
    print(f"jax {release} on CPython {tag}")
    without = ensure_venv(args.venvs / tag / "without", pins, args.python)
    with_pair = ensure_venv(args.venvs / tag / "with", pins + wheels, args.python)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    if args.gpu_path:
        gpu_path(with_pair, env, min(args.runs, 15))
        return 0

    for python in (without, with_pair):  # warm the page cache once
        timed_run(python, env)
    base: list[float] = []
    ours: list[float] = []
    for index in range(args.runs):
        if index % 2 == 0:
            base.append(timed_run(without, env))
            ours.append(timed_run(with_pair, env))
        else:
            ours.append(timed_run(with_pair, env))
            base.append(timed_run(without, env))
    ratios = [o / b for o, b in zip(ours, base, strict=True)]
    print(f"command: python -c {COMMAND!r}  ({args.runs} pairs, ABBA order)")
    print(f"without the pair: median {statistics.median(base) * 1000:.1f} ms")
    print(f"with the pair:    median {statistics.median(ours) * 1000:.1f} ms")
    quartiles = statistics.quantiles(ratios, n=4)
    print(f"median ratio with/without: {statistics.median(ratios):.4f} (IQR {quartiles[0]:.4f}-{quartiles[2]:.4f})")
    samples = [importtime_ms(python, env) for python in (without, with_pair) for _ in range(11)]
    base_gpu = statistics.median(t for _, t in samples[:11])
    ours_self = statistics.median(o for o, _ in samples[11:])
    with_gpu = statistics.median(t for _, t in samples[11:])
    print(
        f"-X importtime self times, median of 11: our modules {ours_self:.2f} ms; jaxlib.gpu_* "
        f"{base_gpu:.2f} ms without the pair, {with_gpu:.2f} ms with it"
    )
    own = statistics.median(in_process_ms(with_pair, env) for _ in range(min(args.runs, 15)))
    share = own / (statistics.median(base) * 1000)
    print(f"plugin imports + initialize(), in process: median {own:.2f} ms = {share:.2%} of the command")
    return 0


if __name__ == "__main__":
    sys.exit(main())
