"""Size and build time of the jax-rocm7-pjrt wheel for the released library, and the compression choice.

    python benchmarks/wheel_size.py [--release 0.10.2] [--levels 1,6,9]

Builds our pjrt wheel from the published jax-rocm7-pjrt library with build.py (timed,
`check` included), compares its size with the published wheel, then deflates the
library alone at each zlib level to show what each level would cost and save.
Wheels may only use deflate (or no compression), so the choice is a level.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def deflated_size(path: Path, level: int) -> tuple[int, float]:
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
    size = 0
    start = time.perf_counter()
    with open(path, "rb") as handle:
        while chunk := handle.read(16 << 20):
            size += len(compressor.compress(chunk))
    size += len(compressor.flush())
    return size, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--release", default="0.10.2")
    parser.add_argument("--levels", default="1,6,9")
    args = parser.parse_args()

    from build.build import CACHE_DIR

    with tempfile.TemporaryDirectory() as directory:
        start = time.perf_counter()
        done = subprocess.run(
            [
                sys.executable,
                str(REPO / "build" / "build.py"),
                "wheels",
                "--pjrt-library",
                "released",
                "--release",
                args.release,
                "--only",
                "pjrt",
                "--output-dir",
                directory,
            ],
            capture_output=True,
            text=True,
        )
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            print(done.stdout + done.stderr)
            return 1
        ours = next(Path(directory).glob("*.whl"))
        upstream = next((CACHE_DIR / "released").glob(f"jax_rocm7_pjrt-{args.release}-*.whl"))
        print(f"published {upstream.name}: {upstream.stat().st_size / 1e6:.1f} MB")
        print(f"ours      {ours.name}: {ours.stat().st_size / 1e6:.1f} MB, built in {elapsed:.1f} s (check included)")
        with zipfile.ZipFile(ours) as archive:
            member = "jax_rocm7_pjrt/xla_rocm_plugin.so"
            library = Path(archive.extract(member, directory))
        raw = library.stat().st_size
        print(f"library {raw / 1e6:.1f} MB; deflate levels (library alone):")
        for level in (int(x) for x in args.levels.split(",")):
            size, seconds = deflated_size(library, level)
            print(f"  level {level}: {size / 1e6:7.2f} MB ({size / raw:.1%}) in {seconds:5.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
