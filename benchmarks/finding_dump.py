"""Every finding the doctor and the job comparison give on the suite's synthetic machines, as JSON lines: the record
a change of the engine is held to (the same findings before and after, but for the fields it adds).

- the doctor, in process, on every machine the suite builds for it: the healthy fleet and the public failures of
  tests/support/fleet.py (each on every released pair it is run on), and each known-issue thread's machine and
  control of tests/integration/test_known_issues.py;
- the job comparison (`cluster --json`'s findings, `_job/compare.py`) on the synthetic jobs of tests/support/records.py
  with each attribute the page tests make odd.

A finding is dumped as id, severity, known issue, fix_check and, where the checkout has them, what it concerns and
the finding it follows from. Run from outside the project root:

    python /path/to/benchmarks/finding_dump.py [--source CHECKOUT] --output FILE
    python /path/to/benchmarks/finding_dump.py --compare BEFORE AFTER

`--compare` prints the lines that differ other than by the added fields (`concerns`, `follows`). `--words` keeps each
finding's summary, fix and evidence too: the record for a change that moves where words are made.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ADDED_FIELDS = ("concerns", "follows")
# A host's own warning as its record carries it (_job/record.py: id, summary, and the GPU's address where it has it).
DEGRADED = (("pcie-link-degraded", "GPU 3 (gfx942 at 0000:03:00.0): its PCIe link runs at 16 GT/s x8"),)


WORDS = ("summary", "fix", "evidence")  # with --words: a change that moves where the words are made changes none
KEPT = ["id", "severity", "known_issue", "fix_check", "processes", "hosts", *ADDED_FIELDS]


def _dumped(finding: dict[str, object]) -> dict[str, object]:
    return {k: finding[k] for k in KEPT if k in finding}


def _all(findings: Iterable[Any]) -> list[dict[str, object]]:
    return [_dumped(f.to_json()) for f in findings]


def _doctor_lines(work: Path) -> Iterator[dict[str, object]]:
    import pytest
    from diagnosis import _fixtures  # benchmarks/diagnosis.py, beside this file

    from tests.integration.test_known_issues import CASES, build_machine
    from tests.support.fleet import FAILURES, HEALTHY, diagnose_host, released_pairs
    from tests.support.inprocess import doctor
    from tests.support.sysroots import library_of

    build = _fixtures(work / "build")
    patch = pytest.MonkeyPatch()
    count = iter(range(100000))
    for entry, machines in CASES.items():
        for side, machine in zip(("thread", "control"), machines, strict=True):
            with patch.context() as inner:
                root = build_machine(machine, work / str(next(count)), build, inner)
                report = doctor(machine.environ, root, library_of(build))
            yield {
                "machine": f"known issue {entry} ({side})",
                "findings": [_dumped(f.to_json()) for f in report.findings],
            }
    for release, rocm in released_pairs():
        for case in FAILURES:
            report = diagnose_host(case.host, case.rocm, case.release or release, work / str(next(count)), build, patch)
            yield {"machine": f"{case.thread} on jax {case.release or release}", "findings": _all(report.findings)}
        for host in HEALTHY:
            if host.layout == "therock" and rocm.startswith("7.2."):
                continue  # not a configuration the 0.10.2 pair serves (test_healthy_fleet.py)
            report = diagnose_host(host, rocm, release, work / str(next(count)), build, patch)
            yield {
                "machine": f"{host.name} on jax {release}",
                "findings": [_dumped(f.to_json()) for f in report.findings],
            }


def _job_lines() -> Iterator[dict[str, object]]:
    from jax_rocm7_plugin._job.compare import compare
    from jax_rocm7_plugin._job.record import HealthFact
    from tests.support.records import PER_HOST, healthy_gpu, job, lab

    odd_hosts = {
        "power cap": {(1, 2): {"power_cap": 500}},
        "partition mode": {(1, 0): {"modes": "CPX/NPS4"}},
        "performance level": {(2, 3): {"level": "manual"}},
        "PCIe link": {(0, 5): {"link": "16 GT/s x8"}},
        "healthy": {},
    }
    for name, odd in odd_hosts.items():
        for hosts in (2, 4):
            found = compare(lab(hosts, odd))  # type: ignore[arg-type]
            yield {"machine": f"job of {hosts} hosts, {name}", "findings": _all(found)}
    other = (("python", "3.11.7"), ("jax", "0.10.2"), ("jaxlib", "0.10.2"), ("jax-rocm7-plugin", "0.10.1"))
    try:  # a checkout whose records name a fault's GPUs as data
        from jax_rocm7_plugin._job.record import Fault

        faults: tuple[Any, ...] = tuple(Fault(*fault, (3,)) for fault in DEGRADED)
    except ImportError:
        faults = DEGRADED
    degraded = HealthFact(tuple(healthy_gpu(g) for g in range(PER_HOST)), faults)
    for name, changes in {
        "one process on another version": {3: {"versions": other}},
        "one host with a degraded GPU": {p: {"health": degraded} for p in range(PER_HOST, 2 * PER_HOST)},
        "healthy job of 16": {},
    }.items():
        found = compare(job(16, changes))  # type: ignore[arg-type]
        yield {"machine": name, "findings": _all(found)}


def _compare(before: Path, after: Path) -> int:
    def load(path: Path) -> dict[str, list[dict[str, object]]]:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return {line["machine"]: line["findings"] for line in lines}

    def without_added(findings: list[dict[str, object]]) -> list[dict[str, object]]:
        return [{k: v for k, v in f.items() if k not in ADDED_FIELDS} for f in findings]

    old, new = load(before), load(after)
    differing = 0
    for machine in sorted(set(old) | set(new)):
        a, b = old.get(machine), new.get(machine)
        if a is None or b is None or without_added(a) != without_added(b):
            differing += 1
            print(f"differs: {machine}\n  before: {a}\n  after:  {b}")
    added = sum(1 for findings in new.values() for f in findings if any(k in f for k in ADDED_FIELDS))
    print(f"{len(old)} machines before, {len(new)} after; {differing} differ beyond the added fields; "
          f"{added} findings carry an added field")  # fmt: skip
    return 1 if differing else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="dump the findings of another checkout (its jax_rocm7_plugin)")
    parser.add_argument("--output", type=Path, help="the JSON-lines file to write")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"), help="compare two dumps")
    parser.add_argument("--words", action="store_true", help="dump each finding's summary, fix and evidence too")
    args = parser.parse_args()
    if args.words:
        KEPT.extend(WORDS)
    if args.compare is not None:
        raise SystemExit(_compare(*args.compare))
    if args.output is None:
        parser.error("--output FILE or --compare BEFORE AFTER")
    sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
    with tempfile.TemporaryDirectory(prefix="finding-dump-") as work:
        if args.source is not None:  # its package only: the machines (tests/) stay this checkout's
            (Path(work) / "source").mkdir()
            (Path(work) / "source" / "jax_rocm7_plugin").symlink_to(args.source.resolve() / "jax_rocm7_plugin")
            sys.path.insert(0, str(Path(work) / "source"))
        with args.output.open("w", encoding="utf-8") as out:
            for line in (*_doctor_lines(Path(work)), *_job_lines()):
                # The machines' own folder differs from run to run: said as <work>, so two dumps compare.
                out.write(json.dumps(line, sort_keys=True).replace(work, "<work>") + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
