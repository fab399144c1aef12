"""How long the default `cluster --deep` takes, and the bus-bandwidth table it prints.

    python benchmarks/cluster_deep.py --library PATH [--processes 2 4] [--platform cpu] [--sizes ...]

Starts N real processes of `python -m jax_rocm7_plugin cluster --deep` on this machine's address (each with
its own synthetic sysroot of two gfx942 GPUs, tests/support/cluster.py, and PATH as the library), with the
default sizes (8 B x 4^k to 128 MiB, then 256 MiB) unless --sizes says otherwise, and prints the wall time
until the last process exits, then process 0's table. On 'cpu' the figures measure gloo over this machine's
network stack, not GPUs. Run it from outside the repository, with nothing else heavy running.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from jax_rocm7_plugin._cluster.collectives import Figure, table_lines  # noqa: E402
from tests.support.cluster import free_port, gpus_with_ids, host_sysroot, routable_address  # noqa: E402


def deep_run(
    python: str, library: Path, count: int, platform: str, sizes: str | None, work: Path
) -> tuple[float, dict]:
    address = f"{routable_address()}:{free_port()}"
    processes = []
    started = time.perf_counter()
    for pid in range(count):
        root = host_sysroot(work / f"p{pid}", f"node-{pid // 2}", gpus_with_ids(2))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
        env.update(JAX_ROCM_SYSROOT=str(root), JAX_ROCM_PJRT_LIBRARY=str(library), PYTHONPATH=str(REPO))
        argv = [python, "-m", "jax_rocm7_plugin", "cluster", "--coordinator-address", address, "--num-processes"]
        argv += [str(count), "--process-id", str(pid), "--local-device-ids", str(pid % 2), "--deep", "--json"]
        argv += ["--platform", platform, "--timeout", "120", *(["--sizes", sizes] if sizes else [])]
        processes.append(subprocess.Popen(argv, env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
    outputs = [p.communicate(timeout=1800)[0] for p in processes]
    seconds = time.perf_counter() - started
    return seconds, json.loads(outputs[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", type=Path, required=True)
    parser.add_argument("--processes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--platform", default="cpu", choices=("cpu", "rocm"))
    parser.add_argument("--sizes", default=None)
    parser.add_argument("--python", default=sys.executable)
    options = parser.parse_args()
    for count in options.processes:
        with tempfile.TemporaryDirectory() as folder:
            seconds, report = deep_run(
                options.python, options.library, count, options.platform, options.sizes, Path(folder)
            )
        figures = tuple(
            Figure(c["op"], c["bytes"], c["seconds"], c["ranks"], c["group"], c["algbw_gbps"], c["busbw_gbps"])
            for c in report.get("collectives", [])
        )
        problems = [f["id"] for f in report["findings"]]
        print(f"{count} processes: {seconds:.1f} s wall, verdict {report['verdict']} {problems or ''}")
        print("\n".join(table_lines(figures)))


if __name__ == "__main__":
    main()
