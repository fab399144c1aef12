"""How long the default `cluster --deep` takes, and the bus-bandwidth table it prints.

    python benchmarks/cluster_deep.py --library PATH [--processes 2 4] [--sizes ...] [--platform cpu|rocm]
        [--lab-hosts 4 --throttle 1:100mbit]

Starts N real processes of `python -m jax_rocm7_plugin cluster --deep` (tests/support/deep_job.py:
each with its own synthetic sysroot of two gfx942 GPUs and PATH as the library, two processes to a host name),
with the default sizes (8 B x 4^k to 128 MiB, then 256 MiB) unless --sizes says otherwise, and prints the wall
time until the last process exits, then process 0's table and findings. With --lab-hosts each process runs on a
host of its own with its own network link (tests/support/netlab.py; root), one of which --throttle slows. On
'cpu' (the default) the figures measure gloo over this machine's network stack, not GPUs. Run it from outside the
repository, with nothing else heavy running.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from jax_rocm7_plugin._cluster.collectives import Figure, table_lines  # noqa: E402
from tests.support.deep_job import DeepJob, report_of  # noqa: E402
from tests.support.netlab import NetLab  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", type=Path, required=True)
    parser.add_argument("--processes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--sizes", default=None)
    parser.add_argument("--platform", default="cpu", choices=("cpu", "rocm"))
    parser.add_argument("--python", type=Path, default=Path(sys.executable))
    parser.add_argument(
        "--lab-hosts", type=int, default=0, help="run each process on a host of its own (network namespaces, root)"
    )
    parser.add_argument("--throttle", default=None, help="HOST:RATE, e.g. 1:100mbit: that lab host's link (tc-tbf)")
    options = parser.parse_args()
    for count in options.processes:
        lab = NetLab(options.lab_hosts) if options.lab_hosts else None
        try:
            if lab is not None and options.throttle:
                host, rate = options.throttle.split(":")
                lab.throttle(int(host), rate)
            with tempfile.TemporaryDirectory() as folder:
                per_host = 1 if lab is not None else 2
                job = DeepJob(
                    Path(folder),
                    options.library,
                    count,
                    options.python,
                    str(REPO),
                    per_host=per_host,
                    lab=lab,
                    step_timeout=60,
                    platform=options.platform,
                )
                started = time.perf_counter()
                results = job.run(sizes=options.sizes, limit=1800)
                seconds = time.perf_counter() - started
        finally:
            if lab is not None:
                lab.close()
        report = report_of(results)
        figures = tuple(Figure(**c) for c in report.get("collectives", []))
        print(f"{count} processes: {seconds:.1f} s wall, verdict {report['verdict']}")
        print("\n".join(table_lines(figures)))
        for finding in report["findings"]:
            print(f"  {finding['id']}: {finding['summary']}")


if __name__ == "__main__":
    main()
