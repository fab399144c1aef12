"""How long the doctor takes, and how long reading a library's GPU targets takes.

    python benchmarks/doctor_speed.py --library PATH [--runs N]

Prints medians (and min/max) in milliseconds for:
- target scan: offload-bundle targets of PATH (`scan_library`), each run in a fresh
  interpreter so imports (zstandard) count; the file is in the page cache after run 1;
- diagnose(): the doctor's work in process, on this machine and on a synthetic
  8 x gfx942 machine with ROCm 7 in /opt/rocm and PATH as the library (NEEDED
  closure resolved, targets scanned, coverage judged);
- the CLI: `python -m jax_rocm7_plugin doctor --json` wall time, minus `python -c pass`
  (interpreter start-up), which is the doctor's own share.
The goal is < 100 ms for the doctor's own work and for the target scan.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def summary(name: str, samples_ms: list[float]) -> str:
    return (
        f"{name:<58} median {statistics.median(samples_ms):7.1f} ms"
        f"   min {min(samples_ms):7.1f}   max {max(samples_ms):7.1f}   (n={len(samples_ms)})"
    )


def time_child(code: str, runs: int) -> list[float]:
    """Wall time of `python -c code` measured inside the child, so start-up is excluded."""
    wrapped = f"import time; t0 = time.perf_counter()\n{code}\nprint((time.perf_counter() - t0) * 1000)"
    samples = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", wrapped], capture_output=True, text=True, cwd=REPO, check=True)
        samples.append(float(done.stdout.strip().splitlines()[-1]))
    return samples


def time_command(command: list[str], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, cwd=REPO, check=False)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def synthetic_machine(root: Path) -> Path:
    """8 x gfx942 with render nodes, /dev/kfd, and a ROCm 7 tree holding a HIP runtime."""
    from tests.support.sysroots import Gpu, make_sysroot

    make_sysroot(root, [Gpu(drm_render_minor=128 + i) for i in range(8)])
    lib = root / "opt" / "rocm-7.0.2" / "lib"
    lib.mkdir(parents=True)
    (root / "opt" / "rocm-7.0.2" / ".info").mkdir()
    (root / "opt" / "rocm-7.0.2" / ".info" / "version").write_text("7.0.2-56\n")
    (root / "opt" / "rocm").symlink_to("rocm-7.0.2")
    (root / "proc").mkdir()
    (root / "proc" / "mounts").write_text("shm /dev/shm tmpfs rw,size=16g 0 0\n")
    return root


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--library", type=Path, required=True, help="a ROCm PJRT library, e.g. jax-rocm7-pjrt 0.10.0's")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    library = args.library.resolve()

    scan = "from pathlib import Path\nfrom jax_rocm7_plugin._binary.offload_bundles import scan_library\n"
    scan += f"scan_library(Path({str(library)!r}))"
    print(
        summary(f"target scan of {library.name} ({library.stat().st_size / 1e6:.0f} MB)", time_child(scan, args.runs))
    )

    with tempfile.TemporaryDirectory() as directory:
        root = synthetic_machine(Path(directory) / "root")
        diagnose = (
            "import os\nfrom pathlib import Path\nfrom jax_rocm7_plugin._doctor.diagnose import diagnose\n"
            "from jax_rocm7_plugin._settings import read_settings\n"
            "library = {library}\n"
            "environ = {{**os.environ, **({{'JAX_ROCM_PJRT_LIBRARY': str(library)}} if library else {{}})}}\n"
            "diagnose(read_settings(environ, sysroot=Path({root!r})))"
        )
        here = diagnose.format(root="/", library="None")
        gpu = diagnose.format(root=str(root), library=f"Path({str(library)!r})")
        print(summary("diagnose(): this machine, installed library", time_child(here, args.runs)))
        print(summary("diagnose(): 8 x gfx942 + ROCm 7 sysroot, --library", time_child(gpu, args.runs)))

        python = [sys.executable, "-c", "pass"]
        cli = [sys.executable, "-m", "jax_rocm7_plugin", "doctor", "--json", "--sysroot", str(root)]
        cli += ["--library", str(library)]
        baseline = time_command(python, args.runs)
        whole = time_command(cli, args.runs)
        print(summary("python -c pass", baseline))
        print(summary("python -m jax_rocm7_plugin doctor --json (8-GPU sysroot)", whole))
        own = statistics.median(whole) - statistics.median(baseline)
        print(f"{'doctor CLI minus interpreter start-up':<58} median {own:7.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
