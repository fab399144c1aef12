"""What checking its fixes costs the doctor: diagnose() with and without the reruns of _doctor/proof.py.

Synthetic machines of tests/support/fleet.py (test fixtures: sysroots in the documented formats, link-stub
libraries): a healthy one (nothing to check), the 0.10.2 pair's known-issue workaround, an iGPU hidden by value,
a container user given a group by number. Run from outside the project root, with nothing else running:

    python /path/to/benchmarks/doctor_proofs.py [--runs 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="diagnoses per machine and mode (default 10)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    import pytest

    from benchmarks.diagnosis import _fixtures
    from jax_rocm7_plugin._doctor.diagnose import diagnose_with_facts
    from jax_rocm7_plugin._settings import PJRT_LIBRARY, read_settings
    from tests.integration.test_remedies import CONTAINER_USER, DESKTOP
    from tests.support.fleet import HEALTHY, build_host, released_pair

    machines = [
        ("MI300X x8, healthy, jax 0.12.0", HEALTHY[0], "0.12.0", "7.14.0"),
        ("MI300X x8, jax 0.10.2 on ROCm 7.2.0 (a known issue's XLA flag)", HEALTHY[0], "0.10.2", "7.2.0"),
        ("RX 7900 XTX + iGPU (HIP_VISIBLE_DEVICES)", DESKTOP, "0.12.0", "7.14.0"),
        ("container user in 'render' by name (a group id)", CONTAINER_USER, "0.12.0", "7.14.0"),
    ]
    with tempfile.TemporaryDirectory(prefix="doctor-proofs-") as folder:
        work = Path(folder)
        build = _fixtures(work / "build")
        print("| machine | diagnose() without checks | with | fixes checked |")
        print("| --- | --- | --- | --- |")
        for index, (name, host, release, rocm) in enumerate(machines):
            with pytest.MonkeyPatch.context() as patch:
                root, environ, library = build_host(host, rocm, work / str(index), build, patch)
                environ = {**environ, PJRT_LIBRARY: str(library)}
                with released_pair(release, patch):
                    times: dict[bool, list[float]] = {False: [], True: []}
                    checked = 0
                    for _ in range(args.runs):
                        for prove in (False, True):  # interleaved: drift hits both alike
                            started = time.perf_counter()
                            report, _ = diagnose_with_facts(read_settings(environ, sysroot=root), prove=prove)
                            times[prove].append(time.perf_counter() - started)
                            if prove:
                                checked = sum(1 for f in report.findings if f.remedy and f.remedy.checked is not None)
            without, with_checks = (1000 * statistics.median(times[p]) for p in (False, True))
            print(f"| {name} | {without:.1f} ms | {with_checks:.1f} ms | {checked} |")


if __name__ == "__main__":
    main()
