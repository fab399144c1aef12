#!/usr/bin/env python3
"""How long the published PJRT libraries take to dlopen, cold (evicted from the page cache) and warm:
the figure the loader's child-load bound (`JAX_ROCM_LOAD_TIMEOUT`) is set from.

    python benchmarks/cold_load.py WHEEL.whl [WHEEL.whl ...] [--runs 3] [--workdir DIR]

Each wheel is a published jax-rocm7-pjrt wheel (build/build.py's `released` cache keeps them). The
library is extracted, its ROCm sonames are supplied as link stubs (tests/support/stubs.py: test
fixtures that stand in for ROCm, so constructors run but nothing reaches a GPU), then loaded in a
fresh `python -I -S` child the way the loader's probe does, after evicting the library and the
stubs from the page cache (posix_fadvise DONTNEED, and /proc/sys/vm/drop_caches where writable).
Run it from outside the project root with nothing else heavy running.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jax_rocm7_plugin._names import LIBRARY_FILE  # noqa: E402
from tests.support.stubs import make_link_stubs  # noqa: E402

LOAD = "import ctypes, sys, time; s = time.perf_counter(); ctypes.CDLL(sys.argv[1]); print(time.perf_counter() - s)"


def evict(paths: list[Path]) -> str:
    """Drop the files' pages from the page cache; say how."""
    os.sync()
    with contextlib.suppress(OSError):
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        return "drop_caches"
    for path in paths:
        descriptor = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(descriptor)
    return "posix_fadvise"


def resident_fraction(path: Path) -> float:
    """Share of the file's pages in the page cache (mincore over a read-only mapping), to show the eviction worked."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    descriptor = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, descriptor, 0)
        vector = (ctypes.c_ubyte * pages)()
        try:
            if libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(size), vector) != 0:
                return float("nan")
        finally:
            libc.munmap(ctypes.c_void_p(address), ctypes.c_size_t(size))
    finally:
        os.close(descriptor)
    return sum(v & 1 for v in vector) / pages


def timed_load(library: Path, stubs: Path) -> tuple[float, float]:
    """(seconds inside dlopen, seconds for the whole child) for one load."""
    env = {"PATH": os.environ.get("PATH", ""), "LD_LIBRARY_PATH": str(stubs)}
    start = time.perf_counter()
    command = [sys.executable, "-I", "-S", "-c", LOAD, str(library)]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    whole = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{library} did not load: {done.stderr.strip()}")
    return float(done.stdout), whole


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheels", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="cold-load-"))
    for wheel in args.wheels:
        folder = workdir / wheel.stem
        with zipfile.ZipFile(wheel) as archive:  # upstream keeps it under jax_plugins/, ours under jax_rocm7_pjrt/
            (member,) = [name for name in archive.namelist() if name.endswith("/" + LIBRARY_FILE)]
            library = folder / member
            if not library.is_file():
                archive.extract(member, folder)
        stubs = make_link_stubs([library], folder / "stubs")
        files = [library, *sorted(stubs.glob("*.so*"))]
        size_mb = library.stat().st_size / 1e6
        cold, warm = [], []
        for _ in range(args.runs):
            how = evict(files)
            before = resident_fraction(library)
            cold.append(timed_load(library, stubs))
            warm.append(timed_load(library, stubs))
        print(
            f"{wheel.name}: {size_mb:.0f} MB, evicted by {how} (resident before a cold load: {before:.0%}); "
            f"dlopen cold median {statistics.median(c[0] for c in cold):.2f} s "
            f"(max {max(c[0] for c in cold):.2f}, child {statistics.median(c[1] for c in cold):.2f} s), "
            f"warm median {statistics.median(w[0] for w in warm):.2f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
