"""What a page costs: its size and the time to draw and write it, for `cluster --html` at 64 and 1,024 hosts
(8 GPUs each, one odd GPU, the records as the preflight builds them: tests/support/records.py).

    python benchmarks/pages.py [--hosts 64 1024] [--runs 5]

The comparison is not timed here (benchmarks/job_check.py times it): only what --html adds to process 0, the
page drawn from the report and the records, and written whole. Printed: the median and the slowest of the runs,
and the page's size. Goal: under a second at 1,024 hosts. Run it from outside the repository, with nothing else
heavy running.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from jax_rocm7_plugin._cluster.report import ClusterReport  # noqa: E402
from jax_rocm7_plugin._job.compare import compare  # noqa: E402
from jax_rocm7_plugin._pages import cluster, output  # noqa: E402
from tests.support.records import lab  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, nargs="+", default=[64, 1024])
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    print(f"{'hosts':>6} {'GPUs':>6} {'page':>10} {'median':>9} {'slowest':>9}")
    with tempfile.TemporaryDirectory() as folder:
        for hosts in options.hosts:
            records = lab(hosts, {(17 % hosts, 3): {"link": "16 GT/s x8"}})
            names = tuple(sorted({r.host for r in records.values()}))
            report = ClusterReport(len(records), tuple(sorted(records)), (), names, tuple(compare(records)))
            target = Path(folder) / f"cluster-{hosts}.html"
            times = []
            for _ in range(options.runs):
                began = time.perf_counter()
                page = cluster.render(report.to_json(), records)
                failed = output.write(target, page, force=True)
                times.append(time.perf_counter() - began)
                assert failed is None, failed
            size = target.stat().st_size
            print(
                f"{hosts:>6} {hosts * 8:>6} {size / 1024:>7.1f} KB {statistics.median(times) * 1e3:>6.1f} ms "
                f"{max(times) * 1e3:>6.1f} ms"
            )


if __name__ == "__main__":
    main()
